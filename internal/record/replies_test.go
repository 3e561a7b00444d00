package record

import "testing"

// A script reply of an unexpected shape is an error, never a guess.
func TestUnexpectedBeginRepliesAreErrors(t *testing.T) {
	t.Parallel()
	for _, reply := range [][]any{
		{}, {int64(1)}, {"ok"}, {"ok", "x", "", ""}, {"ok", int64(2), "", ""}, {"ok", "2"}, {"ok", "2", "rate", "soon"},
		{"notdue"}, {"poison", "3"}, {"poison", "3", "soon"},
		{"pending", "-1"}, {"whatever", "1"},
	} {
		if b, err := parseBegin(tid, reply, nil, ""); err == nil {
			t.Errorf("reply %v: %+v, want an error", reply, b)
		}
	}
	for _, tc := range []struct {
		reply []any
		want  BeginState
	}{
		{[]any{"missing"}, Missing}, {[]any{"notdue", "5"}, NotDue}, {[]any{"ok", "2", "", ""}, Started}, {[]any{"ok", "2", "rate", "5"}, Started},
		{[]any{"poison", "3", "7"}, Poisoned}, {[]any{"failed", "-1"}, Finished},
	} {
		b, err := parseBegin(tid, tc.reply, map[string]string{fStatus: "pending"}, specJSON)
		if err != nil || b.State != tc.want {
			t.Errorf("reply %v: %+v %v, want state %v", tc.reply, b, err, tc.want)
		}
	}
}
