package record

import "testing"

// A script reply of an unexpected shape is an error, never a guess.
func TestUnexpectedBeginRepliesAreErrors(t *testing.T) {
	t.Parallel()
	// with appends the record begin.lua returns: the spec, then beginFields.
	with := func(head ...any) []any {
		out := append(head, specJSON)
		for range beginFields {
			out = append(out, "")
		}
		return out
	}
	for _, reply := range [][]any{
		{}, {int64(1)}, {"ok"}, {"ok", "x", "", ""}, {"ok", int64(2), "", ""}, {"ok", "2"}, {"ok", "2", "rate", "soon"},
		{"ok", "2", "", ""}, with("ok", "2", "", "")[:6], append(with("ok", "2", "", ""), "extra"), with("ok", "2", "rate", "soon"),
		{"notdue"}, {"poison", "3"}, {"poison", "3", "soon"}, {"poison", "3", "7"}, with("poison", "3", "soon"),
		{"pending", "-1"}, {"whatever", "1"},
	} {
		if b, err := parseBegin(tid, reply); err == nil {
			t.Errorf("reply %v: %+v, want an error", reply, b)
		}
	}
	for _, tc := range []struct {
		reply []any
		want  BeginState
	}{
		{[]any{"missing"}, Missing}, {[]any{"notdue", "5"}, NotDue}, {with("ok", "2", "", ""), Started}, {with("ok", "2", "rate", "5"), Started},
		{with("poison", "3", "7"), Poisoned}, {[]any{"failed", "-1"}, Finished},
	} {
		b, err := parseBegin(tid, tc.reply)
		if err != nil || b.State != tc.want {
			t.Errorf("reply %v: %+v %v, want state %v", tc.reply, b, err, tc.want)
		}
	}
}
