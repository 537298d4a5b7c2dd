package postgres

import (
	"fmt"
	"regexp"
	"strconv"
)

// args holds a statement's named arguments, by the names its SQL uses.
type args map[string]any

// statement is SQL written with named parameters (@name), turned once, when
// the package loads, into PostgreSQL's positional form ($1, $2, ...), so
// that every statement names its parameters (now is @now everywhere) while
// each call costs no more than positional arguments would. (pgx.NamedArgs
// would rewrite the SQL text on every call.)
type statement struct {
	sql   string   // positional SQL
	names []string // names[i] is the name of $i+1
}

var paramPattern = regexp.MustCompile(`@[a-z_][a-z0-9_]*`)

// compile turns named SQL into a statement. The same name gets the same
// position wherever it appears.
func compile(named string) statement {
	var st statement
	pos := map[string]int{}
	st.sql = paramPattern.ReplaceAllStringFunc(named, func(m string) string {
		name := m[1:]
		i, ok := pos[name]
		if !ok {
			st.names = append(st.names, name)
			i = len(st.names)
			pos[name] = i
		}
		return "$" + strconv.Itoa(i)
	})
	return st
}

// bind returns the positional arguments for a: every name the statement
// uses must be given (a missing one is a bug in this package, not input).
func (st statement) bind(a args) []any {
	out := make([]any, len(st.names))
	for i, n := range st.names {
		v, ok := a[n]
		if !ok {
			panic(fmt.Sprintf("postgres: statement parameter @%s has no value", n))
		}
		out[i] = v
	}
	return out
}
