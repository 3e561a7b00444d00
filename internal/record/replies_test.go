package record

import "testing"

// A script reply of an unexpected shape is an error, never a guess.
func TestUnexpectedBeginRepliesAreErrors(t *testing.T) {
	t.Parallel()
	for _, reply := range [][]any{
		{}, {int64(1)}, {"ok"}, {"ok", "x"}, {"ok", int64(2)}, {"notdue"}, {"poison", "3"}, {"poison", "3", "soon"},
		{"pending", "-1"}, {"whatever", "1"},
		{"ok", "2", specJSON}, {"ok", "2", specJSON, "not a record"}, {"ok", "2", specJSON, []any{"status"}},
		{"ok", "2", specJSON, []any{"status", int64(1)}}, {"poison", "3", "7", specJSON},
		{"poison", "3", "soon", specJSON, []any{}},
	} {
		if b, err := parseBegin(tid, reply); err == nil {
			t.Errorf("reply %v: %+v, want an error", reply, b)
		}
	}
	for _, tc := range []struct {
		reply []any
		want  BeginState
	}{
		{[]any{"missing"}, Missing}, {[]any{"notdue", "5"}, NotDue},
		{[]any{"ok", "2", specJSON, []any{fStatus, "pending"}}, Started},
		{[]any{"ok", "2", nil, []any{fStatus, "pending"}}, Started},
		{[]any{"poison", "3", "7", specJSON, []any{fStatus, "pending"}}, Poisoned}, {[]any{"failed", "-1"}, Finished},
	} {
		b, err := parseBegin(tid, tc.reply)
		if err != nil || b.State != tc.want {
			t.Errorf("reply %v: %+v %v, want state %v", tc.reply, b, err, tc.want)
		}
	}
}
