// Package boundary has no API: it holds the test that enforces the module's
// import boundary (boundary_test.go). Every package of the module is neutral
// by default, and a neutral package may not depend, directly or through any
// chain of imports, on a database driver or on a package under sqlstore/.
// Only the packages the test lists by name (the SQL backends under
// sqlstore/, the CLI under cmd/ and PostgreSQL test helpers) are exempt, so a
// package added later is checked without anyone remembering to add it.
//
// The check reads `go list -deps` for the host platform and default build
// tags, and covers what a user's program links: test files' imports are not
// part of it.
package boundary
