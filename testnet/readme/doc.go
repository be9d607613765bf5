// Package readme holds one test and no code: README.md's own commands
// (make demo, the service quick start, gleaner sim), read from its ```sh
// blocks and run as written from a copy of the repository that has
// nothing beside it, so that a command that breaks or no longer works on
// a fresh clone fails the build.
package readme
