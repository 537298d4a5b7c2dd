package migrations

import (
	"bufio"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// Trigger is a trigger that the embedded migrations of a dialect leave in
// place at [LatestVersion].
type Trigger struct {
	// Name is the trigger's name.
	Name string
	// SQL is the statement that created it as SQLite keeps it in
	// sqlite_schema: "CREATE TRIGGER " and the migration's text from the
	// name through END.
	SQL string
	// File is the migration that created it last, as
	// "migrations/sqlite/00002_fencing_floor_and_replays.sql".
	File string
}

// SQLiteTriggers returns the triggers the embedded SQLite migrations create
// and leave in place at [LatestVersion], in name order: what keeps the
// audit trail append-only, marks what a prune removed and keeps the
// fencing counter growing. The SQLite backend refuses a file in which one
// of them is missing or differs. It is read from the migration files
// once (Up sections: each CREATE TRIGGER in a StatementBegin block, each
// DROP TRIGGER). The caller must not modify the slice.
func SQLiteTriggers() ([]Trigger, error) { return sqliteTriggers() }

var sqliteTriggers = sync.OnceValues(func() ([]Trigger, error) {
	fsys, err := FS(SQLite)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names) // the versions, zero-padded
	byName := map[string]Trigger{}
	for _, name := range names {
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		file := path.Join("migrations", string(SQLite), name)
		for _, stmt := range upStatements(string(text)) {
			switch verb, rest := triggerStatement(stmt); verb {
			case "CREATE":
				n := firstWord(rest)
				byName[n] = Trigger{Name: n, SQL: "CREATE TRIGGER " + strings.TrimRight(rest, "; \t\n"), File: file}
			case "DROP":
				delete(byName, strings.TrimRight(firstWord(rest), ";"))
			}
		}
	}
	if len(byName) == 0 {
		return nil, fmt.Errorf("migrations: no trigger found in the SQLite migrations")
	}
	out := make([]Trigger, 0, len(byName))
	for _, t := range byName {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Trigger) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
})

// upStatements returns the statements of the Up section of a goose SQL
// migration as goose runs them: a StatementBegin block whole, else the
// lines up to one ending with a semicolon, without the comments and blank
// lines before each.
func upStatements(text string) []string {
	var (
		stmts       []string
		buf         strings.Builder
		up, inBlock bool
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") && strings.Contains(trimmed, "+goose") {
			switch strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(trimmed, "--"), " +goose")) {
			case "Up":
				up = true
			case "Down":
				return stmts
			case "StatementBegin":
				inBlock = true
			case "StatementEnd":
				inBlock = false
				stmts = append(stmts, strings.TrimSpace(buf.String()))
				buf.Reset()
			}
			continue
		}
		if !up || (buf.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--"))) {
			continue
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if !inBlock && strings.HasSuffix(trimmed, ";") {
			stmts = append(stmts, strings.TrimSpace(buf.String()))
			buf.Reset()
		}
	}
	return stmts
}

// triggerStatement returns "CREATE" or "DROP" and the text after
// CREATE TRIGGER or DROP TRIGGER (and IF [NOT] EXISTS) when stmt is one,
// else "".
func triggerStatement(stmt string) (verb, rest string) {
	words := strings.Fields(stmt)
	if len(words) < 3 || !strings.EqualFold(words[1], "TRIGGER") {
		return "", ""
	}
	verb = strings.ToUpper(words[0])
	if verb != "CREATE" && verb != "DROP" {
		return "", ""
	}
	rest = skipWords(stmt, words[:2])
	for _, opt := range [][]string{{"IF", "NOT", "EXISTS"}, {"IF", "EXISTS"}} {
		if w := strings.Fields(rest); len(w) > len(opt) && slices.EqualFunc(w[:len(opt)], opt, strings.EqualFold) {
			rest = skipWords(rest, w[:len(opt)])
			break
		}
	}
	return verb, rest
}

// skipWords returns s without its first words (white space around them
// dropped), which are words.
func skipWords(s string, words []string) string {
	for _, w := range words {
		s = strings.TrimSpace(s)[len(w):]
	}
	return strings.TrimSpace(s)
}

// firstWord returns s up to its first white space.
func firstWord(s string) string {
	if i := strings.IndexFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }); i >= 0 {
		return s[:i]
	}
	return s
}
