// Package lines is the line that every kind of waiting shares: a sorted
// set in Redis of the requests that wait for an event (a free slot, a
// turn, their order), each at the place it first took. It is Lua, a
// library that the scripts deciding who leaves a line (internal/flow's)
// have first, so that joining, taking and leaving are one primitive with
// one meaning of a place, whichever gate holds the request.
package lines

import _ "embed"

// Library is the Lua of the line: lineJoin, lineMove, lineTake, lineHead,
// lineLeave, and the reads linePlace, lineLast and lineSize (line.lua says
// what each does). No script writes a line key but through it
// (internal/waiting's TestOnlyTheOwnerMovesTasks). It lives with flow: a line changes in the same script as its gate's state.
//
//go:embed line.lua
var Library string
