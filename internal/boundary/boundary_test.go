package boundary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const module = "github.com/leasestore/leasestore"

// exempt lists, relative to the module, the packages that may depend on
// database drivers: each entry covers the package and everything below it.
// Everything else in the module is neutral, including packages added later.
//
//   - sqlstore/<dialect>: the SQL backends. The sqlstore package itself is
//     shared plumbing and stays neutral: it may use database/sql but no driver.
//   - cmd: the CLI, which opens either backend from a DSN.
//   - examples: example programs, which open a backend from a DSN as the
//     CLI does (the libraries they show, scheduler included, stay neutral).
//   - internal/testkit/pgtest: tests' PostgreSQL helper (pgx, testcontainers).
//   - internal/testkit/pgbouncer: tests' PgBouncer (pgx, to see that an
//     alias answers).
//   - kvstore/etcd: the etcd backend; its client (go.etcd.io/etcd/client/v3)
//     is a storage client like a driver, and counts as one here.
//   - internal/testkit/etcdcluster: tests' etcd cluster (the client, for
//     health checks; the member program is a module of its own).
var exempt = []string{
	"sqlstore/postgres",
	"sqlstore/sqlite",
	"kvstore/etcd",
	"internal/testkit/etcdcluster",
	"cmd",
	"examples",
	"internal/testkit/pgtest",
	"internal/testkit/pgbouncer",
}

// driverPrefixes names database drivers and their support packages, by
// import path prefix. Drivers not listed are still caught by looksLikeDriver.
var driverPrefixes = []string{
	"github.com/jackc/pgx",
	"github.com/jackc/pgconn",
	"github.com/jackc/pgtype",
	"github.com/jackc/puddle",
	"github.com/lib/pq",
	"modernc.org/sqlite",
	"modernc.org/libc",
	"github.com/mattn/go-sqlite3",
	"github.com/ncruces/go-sqlite3",
	"github.com/glebarez/go-sqlite",
	"zombiezen.com/go/sqlite",
	"crawshaw.io/sqlite",
	"github.com/go-sql-driver/mysql",
	"github.com/microsoft/go-mssqldb",
	"github.com/denisenkom/go-mssqldb",
	"github.com/ClickHouse/clickhouse-go",
	"github.com/sijms/go-ora",
	"go.etcd.io/etcd",
}

// notDrivers lists packages outside the standard library that import both
// database/sql and database/sql/driver without being drivers. Add one here
// only after checking it registers no driver and links no database client.
var notDrivers = []string{}

// pkg is the part of `go list -json` output the check reads.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// violation is a neutral package that depends on forbidden packages.
type violation struct {
	pkg     string   // the neutral package, relative to the module
	entries []string // the forbidden packages its allowed dependencies import
	reasons []string // why each entry is forbidden
	chain   []string // one import chain from pkg to entries[0]
}

func (v violation) String() string {
	parts := make([]string, len(v.entries))
	for i, e := range v.entries {
		parts[i] = e + " (" + v.reasons[i] + ")"
	}
	return fmt.Sprintf("%s depends on %s; import chain: %s",
		v.pkg, strings.Join(parts, ", "), strings.Join(v.chain, " -> "))
}

// rel returns p relative to the module ("" for the module's root package)
// and whether p is in the module.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	r, ok := strings.CutPrefix(p, module+"/")
	return r, ok
}

func under(r, dir string) bool { return r == dir || strings.HasPrefix(r, dir+"/") }

func isExempt(r string) bool {
	return slices.ContainsFunc(exempt, func(dir string) bool { return under(r, dir) })
}

// looksLikeDriver reports whether p has the shape of a database/sql driver:
// outside the standard library, it imports both database/sql (to register
// itself) and database/sql/driver (to implement it).
func looksLikeDriver(p *pkg) bool {
	return !p.Standard && slices.Contains(p.Imports, "database/sql") &&
		slices.Contains(p.Imports, "database/sql/driver") && !slices.Contains(notDrivers, p.ImportPath)
}

// forbiddenReason says why a neutral package may not depend on p, or "".
func forbiddenReason(p *pkg) string {
	if r, ok := rel(p.ImportPath); ok {
		if under(r, "sqlstore") {
			return "a package of sqlstore"
		}
		if isExempt(r) {
			return "" // the CLI or a test helper: allowed as long as it brings no driver
		}
	}
	for _, prefix := range driverPrefixes {
		if p.ImportPath == prefix || strings.HasPrefix(p.ImportPath, prefix+"/") {
			return "a database driver"
		}
	}
	if looksLikeDriver(p) {
		return "imports database/sql and database/sql/driver as drivers do"
	}
	return ""
}

// check returns one violation per neutral package of the module, sorted.
// A violation names the entry points only: the forbidden packages imported
// by the package itself or by one of its allowed dependencies (pgx, say, and
// not pgx's own subpackages).
func check(pkgs []*pkg) []violation {
	byPath := make(map[string]*pkg, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var out []violation
	for _, p := range pkgs {
		r, ok := rel(p.ImportPath)
		if !ok || isExempt(r) {
			continue
		}
		forbidden := func(path string) string {
			if path == p.ImportPath {
				return "" // sqlstore is itself neutral
			}
			if dp := byPath[path]; dp != nil {
				return forbiddenReason(dp)
			}
			return ""
		}
		reasons := map[string]string{}
		if looksLikeDriver(p) {
			// A driver added to the module outside the exempt packages.
			reasons[p.ImportPath] = "is itself shaped like a driver"
		}
		for _, a := range append([]string{p.ImportPath}, p.Deps...) {
			ap := byPath[a]
			if ap == nil || forbidden(a) != "" {
				continue
			}
			for _, imp := range ap.Imports {
				if why := forbidden(imp); why != "" {
					reasons[imp] = why
				}
			}
		}
		if len(reasons) == 0 {
			continue
		}
		v := violation{pkg: r}
		for e := range reasons {
			v.entries = append(v.entries, e)
		}
		slices.Sort(v.entries)
		for _, e := range v.entries {
			v.reasons = append(v.reasons, reasons[e])
		}
		v.chain = chain(byPath, p.ImportPath, v.entries[0])
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b violation) int { return strings.Compare(a.pkg, b.pkg) })
	return out
}

// chain returns a shortest import chain from one package to another.
func chain(byPath map[string]*pkg, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for p := to; p != ""; p = prev[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		if p := byPath[cur]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return []string{from, "?", to}
}

// moduleRoot returns the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod)
}

// listPackages runs `go list -e -deps -json ./...` at the module's root,
// with an optional overlay file (see `go help build`), and returns every
// package of the build graph. Packages that fail to load fail the test, so
// the check never passes over a graph it could not see.
func listPackages(t *testing.T, root, overlay string) []*pkg {
	t.Helper()
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Standard,Imports,Deps,Module,Error"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, "./...")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []*pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// modulePackages returns the module's packages among pkgs, relative.
func modulePackages(pkgs []*pkg) []string {
	var out []string
	for _, p := range pkgs {
		if r, ok := rel(p.ImportPath); ok {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

func TestNeutralPackagesImportNoDatabaseDriver(t *testing.T) {
	pkgs := listPackages(t, moduleRoot(t), "")
	mods := modulePackages(pkgs)
	// The graph must hold the packages the boundary exists for, and the
	// backends: if it did not, the check below would pass vacuously.
	for _, want := range []string{"protocol", "backendkit", "audit", "contract", "migrations", "httpapi", "internal/wire", "internal/testkit/httpcontract", "scheduler", "scheduler/schedulertest", "sqlstore/postgres", "sqlstore/sqlite", "kvstore/etcd"} {
		if !slices.Contains(mods, want) {
			t.Fatalf("go list did not report %s among the module's packages %v", want, mods)
		}
	}
	var neutral []string
	for _, m := range mods {
		if !isExempt(m) {
			neutral = append(neutral, m)
		}
	}
	t.Logf("neutral packages checked: %s", strings.Join(neutral, " "))

	for _, v := range check(pkgs) {
		t.Errorf("%s", v)
	}

	// The backends do depend on their drivers: were the driver detection
	// broken, they would not.
	byPath := map[string]*pkg{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	for backend, driver := range map[string]string{
		"sqlstore/postgres": "github.com/jackc/pgx/v5",
		"sqlstore/sqlite":   "modernc.org/sqlite",
		"kvstore/etcd":      "go.etcd.io/etcd/client/v3",
	} {
		p := byPath[module+"/"+backend]
		if !slices.ContainsFunc(p.Deps, func(d string) bool { return byPath[d] != nil && forbiddenReason(byPath[d]) != "" }) {
			t.Errorf("%s: no dependency detected as a driver, although it uses %s", backend, driver)
		}
	}
}

// TestMigrationsUseGooseWithoutDriver records the decision about
// migrations/: it imports goose, which imports database/sql but no driver, so
// it is neutral; a service can embed the migrations without linking pgx or
// SQLite. Should goose start importing a driver, the main test fails on
// migrations and this test says why.
func TestMigrationsUseGooseWithoutDriver(t *testing.T) {
	pkgs := listPackages(t, moduleRoot(t), "")
	byPath := map[string]*pkg{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	m := byPath[module+"/migrations"]
	if m == nil {
		t.Fatal("migrations not listed")
	}
	if !slices.Contains(m.Deps, "github.com/pressly/goose/v3") || !slices.Contains(m.Deps, "database/sql") {
		t.Fatalf("migrations no longer depends on goose and database/sql: update this test's explanation")
	}
	for _, d := range m.Deps {
		if dp := byPath[d]; dp != nil && forbiddenReason(dp) != "" {
			t.Errorf("migrations depends on %s (%s) through %s", d, forbiddenReason(dp), strings.Join(chain(byPath, m.ImportPath, d), " -> "))
		}
	}
}

// writeOverlay writes Go files that exist only in go list's view of the
// module (`go help build`, -overlay) and returns the overlay file's path.
// Nothing is written inside the module: other work in the tree is not
// affected, even while this test runs.
func writeOverlay(t *testing.T, root string, files map[string]string) string {
	t.Helper()
	tmp := t.TempDir()
	replace := map[string]string{}
	i := 0
	for relPath, src := range files {
		i++
		content := filepath.Join(tmp, fmt.Sprintf("file%d.go", i))
		if err := os.WriteFile(content, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(root, filepath.FromSlash(relPath))
		if _, err := os.Stat(target); err == nil {
			t.Fatalf("overlay target %s exists in the module: pick another name", target)
		}
		replace[target] = content
	}
	data, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func findViolation(vs []violation, p string) *violation {
	for i := range vs {
		if vs[i].pkg == p {
			return &vs[i]
		}
	}
	return nil
}

// TestCheckFailsOnForbiddenImports proves the check can fail: with go list
// seeing extra files (an overlay; nothing is written to the module), it must
// report each package that gains a forbidden dependency, directly or through
// another package, including packages that do not exist in the tree. Each
// scenario gets its own overlay so one cannot hide another.
func TestCheckFailsOnForbiddenImports(t *testing.T) {
	root := moduleRoot(t)
	type want struct {
		pkg   string
		entry string   // a forbidden package the violation must name
		chain []string // the import chain must start with these
	}
	m := func(p string) string { return module + "/" + p }
	scenarios := []struct {
		name  string
		files map[string]string
		want  []want
		clean []string // neutral packages that must stay unreported
	}{
		{
			name: "protocol imports pgx",
			files: map[string]string{
				"protocol/zz_boundary_probe.go": "package protocol\n\nimport _ \"github.com/jackc/pgx/v5\"\n",
			},
			want: []want{
				{"protocol", "github.com/jackc/pgx/v5", []string{m("protocol"), "github.com/jackc/pgx/v5"}},
				// Importers of protocol inherit the dependency.
				{"memstore", "github.com/jackc/pgx/v5", []string{m("memstore"), m("protocol"), "github.com/jackc/pgx/v5"}},
				{"audit", "github.com/jackc/pgx/v5", nil},
				{"contract", "github.com/jackc/pgx/v5", nil},
				{"promobserver", "github.com/jackc/pgx/v5", nil},
				{"scheduler", "github.com/jackc/pgx/v5", []string{m("scheduler"), m("protocol"), "github.com/jackc/pgx/v5"}},
			},
			clean: []string{"migrations"},
		},
		{
			name: "a new package imports the SQLite backend",
			files: map[string]string{
				"internal/zzboundaryprobe/probe.go": "package zzboundaryprobe\n\nimport _ \"github.com/leasestore/leasestore/sqlstore/sqlite\"\n",
			},
			want:  []want{{"internal/zzboundaryprobe", m("sqlstore/sqlite"), []string{m("internal/zzboundaryprobe"), m("sqlstore/sqlite")}}},
			clean: []string{"protocol", "sqlstore", "audit"},
		},
		{
			name: "the scheduler imports the PostgreSQL backend",
			files: map[string]string{
				"scheduler/zz_boundary_probe.go": "package scheduler\n\nimport _ \"github.com/leasestore/leasestore/sqlstore/postgres\"\n",
			},
			want: []want{
				{"scheduler", m("sqlstore/postgres"), []string{m("scheduler"), m("sqlstore/postgres")}},
				{"scheduler/schedulertest", m("sqlstore/postgres"), []string{m("scheduler/schedulertest"), m("scheduler"), m("sqlstore/postgres")}},
			},
			clean: []string{"protocol", "audit"},
		},
		{
			name: "a new package imports the sqlstore plumbing",
			files: map[string]string{
				"internal/zzboundaryprobe/probe.go": "package zzboundaryprobe\n\nimport _ \"github.com/leasestore/leasestore/sqlstore\"\n",
			},
			want:  []want{{"internal/zzboundaryprobe", m("sqlstore"), []string{m("internal/zzboundaryprobe"), m("sqlstore")}}},
			clean: []string{"protocol", "sqlstore"},
		},
		{
			name: "an unlisted driver, known by its shape",
			files: map[string]string{
				"internal/zzboundarydriver/driver.go": "package zzboundarydriver\n\nimport (\n\t\"database/sql\"\n\t\"database/sql/driver\"\n)\n\n" +
					"var _ driver.Driver\n\nfunc init() { sql.Drivers() }\n",
				"audit/zz_boundary_probe.go": "package audit\n\nimport _ \"github.com/leasestore/leasestore/internal/zzboundarydriver\"\n",
			},
			want: []want{
				{"audit", m("internal/zzboundarydriver"), []string{m("audit"), m("internal/zzboundarydriver")}},
				// A driver among the neutral packages is reported itself.
				{"internal/zzboundarydriver", m("internal/zzboundarydriver"), []string{m("internal/zzboundarydriver")}},
			},
			clean: []string{"protocol"},
		},
		{
			name: "the CLI's package imported by a neutral one",
			files: map[string]string{
				"contract/zz_boundary_probe.go": "package contract\n\nimport _ \"github.com/leasestore/leasestore/cmd/leasectl/cli\"\n",
			},
			want:  []want{{"contract", m("sqlstore/sqlite"), []string{m("contract"), m("cmd/leasectl/cli")}}},
			clean: []string{"protocol", "audit"},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			vs := check(listPackages(t, root, writeOverlay(t, root, sc.files)))
			for _, v := range vs {
				t.Logf("reported: %s", v)
			}
			for _, w := range sc.want {
				v := findViolation(vs, w.pkg)
				if v == nil {
					t.Errorf("the check did not report %s", w.pkg)
					continue
				}
				if !slices.Contains(v.entries, w.entry) {
					t.Errorf("%s: entries %v, want %s among them", w.pkg, v.entries, w.entry)
				}
				if len(v.chain) < len(w.chain) || !slices.Equal(v.chain[:len(w.chain)], w.chain) {
					t.Errorf("%s: chain %v, want it to start %v", w.pkg, v.chain, w.chain)
				}
				if v.chain[len(v.chain)-1] != v.entries[0] {
					t.Errorf("%s: chain %v does not lead to %s", w.pkg, v.chain, v.entries[0])
				}
			}
			for _, c := range sc.clean {
				if v := findViolation(vs, c); v != nil {
					t.Errorf("%s reported although the scenario does not touch it: %s", c, v)
				}
			}
			for _, v := range vs {
				if isExempt(v.pkg) {
					t.Errorf("exempt package %s reported", v.pkg)
				}
			}
		})
	}
}

func TestClassification(t *testing.T) {
	for r, want := range map[string]bool{
		"sqlstore/postgres":              true,
		"sqlstore/sqlite":                true,
		"sqlstore/sqlite/inner":          true,
		"cmd/leasectl":                   true,
		"cmd/leasectl/cli":               true,
		"examples/scanner":               true,
		"examplesx":                      false,
		"internal/testkit/pgtest":        true,
		"sqlstore":                       false,
		"sqlstore/mysql":                 false, // a new dialect must be listed on purpose
		"sqlstorex":                      false,
		"cmdline":                        false,
		"internal/testkit/pgtestutil":    false,
		"internal/boundary":              false,
		"protocol":                       false,
		"protocol/memstore":              false,
		"":                               false,
		"contract":                       false,
		"scheduler":                      false,
		"scheduler/schedulertest":        false,
		"somethingaddedlater/x":          false,
		"internal/testkit/pgtest/nested": true,
		"kvstore/etcd":                   true,
		"kvstore":                        false,
		"kvstore/redis":                  false, // a new engine must be listed on purpose
		"internal/testkit/etcdcluster":   true,
		"internal/testkit/pgbouncer":     true,
	} {
		if got := isExempt(r); got != want {
			t.Errorf("isExempt(%q) = %v, want %v", r, got, want)
		}
	}
}

// TestProductImportsNoTestKit checks that what the module ships stays apart
// from its test scaffolding: no package outside internal/testkit depends,
// directly or through a chain, on a package under it (test files' imports
// are not part of `go list -deps`, so tests may use the kit freely).
func TestProductImportsNoTestKit(t *testing.T) {
	pkgs := listPackages(t, moduleRoot(t), "")
	mods := modulePackages(pkgs)
	if !slices.Contains(mods, "internal/testkit/pgtest") {
		t.Fatalf("go list did not report internal/testkit/pgtest among %v", mods)
	}
	const kit = module + "/internal/testkit"
	for _, p := range pkgs {
		r, ok := rel(p.ImportPath)
		if !ok || r == "internal/testkit" || strings.HasPrefix(r, "internal/testkit/") {
			continue
		}
		for _, d := range p.Deps {
			if d == kit || strings.HasPrefix(d, kit+"/") {
				t.Errorf("%s depends on the test kit package %s: product code may not import internal/testkit", r, d)
			}
		}
	}
}
