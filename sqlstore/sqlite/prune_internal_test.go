package sqlite

import "testing"

// TestTriggerHead reads the event of CREATE TRIGGER statements as
// sqlite_schema keeps them, whatever the name's quoting or the words
// around it; one it cannot read (a comment in its head) matches nothing,
// and the prune counts it in.
func TestTriggerHead(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"CREATE TRIGGER dba_hold BEFORE DELETE ON leasestore_audit BEGIN SELECT RAISE(IGNORE); END":  "DELETE",
		`CREATE TRIGGER "hold ""it""" AFTER DELETE ON leasestore_audit BEGIN SELECT 1; END`:          "DELETE",
		"create temp trigger if not exists main.[a b]delete on leasestore_audit begin select 1; end": "delete",
		"CREATE TRIGGER `x`BEFORE DELETE ON leasestore_audit BEGIN SELECT 1; END":                    "DELETE",
		"CREATE TRIGGER xdelete INSERT ON leasestore_audit BEGIN SELECT 1; END":                      "INSERT",
		"CREATE TRIGGER delete_guard AFTER INSERT ON leasestore_audit BEGIN SELECT 1; END":           "INSERT",
		"CREATE TRIGGER t\n\tINSTEAD OF UPDATE OF at ON v BEGIN SELECT 1; END":                       "UPDATE",
		"CREATE TRIGGER t /* hold */ BEFORE DELETE ON leasestore_audit BEGIN SELECT 1; END":          "",
	} {
		got := ""
		if m := triggerHead.FindStringSubmatch(text); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("the event of %q: %q; want %q", text, got, want)
		}
	}
}
