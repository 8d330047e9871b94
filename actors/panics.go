package actors

// What a task does with a panic is decided here, once, by where the panic
// comes from:
//
//   - A user's Process: the tuple fails and its root replays; the task
//     serves on (processorTask.process). One bad record must not stop a
//     stream.
//   - Other code of a spout or processor task, the user's (a factory,
//     Finish, a source, a dead-letter sink) or acktor's: the task's error,
//     which ends the run (recoverPanic). The task's state can no longer be
//     trusted, and a run that waited on it would never end.
//   - An acker, whose code is all acktor's: a broken invariant of its pure
//     core (assert.Invariant) or any other bug. The acker logs it with its
//     stack and starts its core afresh (ackerTask.restart): the records it
//     held are gone, and their roots replay at their spout tasks' deadlines,
//     as after a crash of its member. Serving on with a core in a state no
//     call could make might complete roots whose trees are not done.
//
// The pure cores themselves never recover: their tests see the panic.
// Outside the actors, a panic of Proto.Actor's StartMember (cluster) or of a
// user's decoder on a broker source's goroutine becomes an error where it is
// called.
