// Package lint holds tests that keep the project's layering rules (docs/architecture.md) true:
// which packages may import what. They read source files only; nothing is built or run.
package lint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/zkd-io/zkd"

// imports returns the import paths of the .go files directly in dir (relative to the module
// root), split into production and test files.
func imports(t *testing.T, dir string) (prod, test map[string][]string) {
	t.Helper()
	prod, test = map[string][]string{}, map[string][]string{}
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range af.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if strings.HasSuffix(f, "_test.go") {
				test[p] = append(test[p], f)
			} else {
				prod[p] = append(prod[p], f)
			}
		}
	}
	return prod, test
}

// packageDirs lists dir and every directory below it that holds .go files.
func packageDirs(t *testing.T, dir string) []string {
	t.Helper()
	var dirs []string
	root := filepath.Join("..", "..")
	start := filepath.Join(root, dir)
	_ = filepath.WalkDir(start, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" || (p != start && strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
			rel, _ := filepath.Rel(root, p)
			dirs = append(dirs, rel)
		}
		return nil
	})
	return dirs
}

func isStdlib(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// TestLayering checks who may import what, for production files and, where it matters, tests.
func TestLayering(t *testing.T) {
	rules := []struct {
		dir     string
		allowed func(string) bool // for production files
		why     string
	}{
		{"jute", isStdlib, "jute is a leaf: standard library only"},
		{"znode", func(p string) bool { return isStdlib(p) || p == module+"/jute" },
			"znode is pure: standard library and jute only"},
		{"consensus", func(p string) bool {
			return !strings.HasPrefix(p, module+"/server") && !strings.HasPrefix(p, module+"/cmd")
		},
			"consensus must not know about the client-facing server"},
		{"server", func(p string) bool {
			return !strings.HasPrefix(p, module+"/cmd") && !strings.Contains(p, "hashicorp/raft") &&
				!strings.HasPrefix(p, module+"/internal/third_party/")
		},
			"server talks to consensus, never to Raft directly"},
		{"sasl", func(p string) bool { return !strings.HasPrefix(p, module+"/") },
			"sasl mechanisms know nothing of zkd: the server calls them through sasl.Exchange"},
		{"internal/zkfile", func(p string) bool {
			return !strings.HasPrefix(p, module+"/") || p == module+"/jute" || p == module+"/znode"
		}, "zkfile is pure: it reads ZooKeeper's files into znode values and knows no server or consensus"},
		{"internal/storage", func(p string) bool {
			return !strings.HasPrefix(p, module+"/") || p == module+"/jute" || p == module+"/znode" ||
				strings.HasPrefix(p, module+"/internal/third_party/")
		}, "storage owns the files under a data directory: Raft's stores and the snapshot format, no replication, server or commands"},
		{"internal/peernet", func(p string) bool {
			return !strings.HasPrefix(p, module+"/") || strings.HasPrefix(p, module+"/internal/third_party/")
		}, "peernet is the peer port's networking: it knows neither replication, storage nor the server"},
		{"recipes", func(p string) bool { return !strings.HasPrefix(p, module+"/") || p == module+"/recipes" },
			"recipes run on go-zookeeper/zk against any server: no zkd internals"},
		{"conformance", func(p string) bool {
			return !strings.HasPrefix(p, module+"/znode") && !strings.HasPrefix(p, module+"/consensus")
		}, "conformance checks are black-box: no znode or consensus internals"},
	}
	for _, r := range rules {
		for _, dir := range packageDirs(t, r.dir) {
			prod, _ := imports(t, dir)
			for p, files := range prod {
				if !r.allowed(p) {
					t.Errorf("%s imports %s (%s); %s", dir, p, strings.Join(files, ", "), r.why)
				}
			}
		}
	}
}

// testkit is the root of the test machinery: everything under it (real Apache ZooKeeper processes,
// the chaos suite, child processes, fault-injecting networks, test certificates) exists for tests.
const testkit = module + "/internal/testkit"

// TestTestMachinery keeps the test machinery out of production code: no production file outside
// internal/testkit/ may import a package under it, except that cmd/zkbench (the side-by-side
// harness against Apache ZooKeeper) may import internal/testkit/apachezk and internal/testkit/child.
func TestTestMachinery(t *testing.T) {
	zkbenchMay := map[string]bool{testkit + "/apachezk": true, testkit + "/child": true}
	dirs := packageDirs(t, ".")
	if len(dirs) < 10 {
		t.Fatalf("found only %d package directories in the module: %v", len(dirs), dirs)
	}
	machinery := 0
	for _, dir := range dirs {
		dir = filepath.ToSlash(dir)
		if inTestkit(dir) {
			machinery++
			continue
		}
		prod, _ := imports(t, dir)
		for p, files := range prod {
			if p != testkit && !strings.HasPrefix(p, testkit+"/") {
				continue
			}
			if dir == "cmd/zkbench" && zkbenchMay[p] {
				continue
			}
			t.Errorf("%s imports %s (%s); it is test machinery (docs/architecture.md)", dir, p, strings.Join(files, ", "))
		}
	}
	if machinery == 0 {
		t.Errorf("found no package under internal/testkit: the rule checks nothing")
	}
}

// TestTestMachineryLivesInTestkit keeps the test machinery in one place: the packages that were
// moved under internal/testkit/ must not come back beside the runtime packages in internal/.
func TestTestMachineryLivesInTestkit(t *testing.T) {
	for _, name := range []string{"apachezk", "chaos", "child", "raftnet", "tlstest", "zktest"} {
		if m, _ := filepath.Glob(filepath.Join("..", "..", "internal", name, "*.go")); len(m) > 0 {
			t.Errorf("internal/%s holds Go files; test machinery lives under internal/testkit/%s", name, name)
		}
	}
}

// inTestkit reports whether a module-relative directory is internal/testkit or below it.
func inTestkit(dir string) bool {
	return dir == "internal/testkit" || strings.HasPrefix(dir, "internal/testkit/")
}

// TestNoPrintInLibraries keeps fmt.Print* and log.Print* out of library packages: they log
// through an injected *slog.Logger.
func TestNoPrintInLibraries(t *testing.T) {
	for _, top := range []string{"jute", "znode", "consensus", "server", "recipes", "sasl"} {
		for _, dir := range packageDirs(t, top) {
			files, _ := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for i, line := range strings.Split(string(b), "\n") {
					l := strings.TrimSpace(line)
					if strings.HasPrefix(l, "//") {
						continue
					}
					for _, bad := range []string{"fmt.Print", "log.Print", "log.Fatal", "println("} {
						if strings.Contains(l, bad) {
							t.Errorf("%s:%d uses %s; libraries log through their Config's *slog.Logger", f, i+1, bad)
						}
					}
				}
			}
		}
	}
}

// TestProcessPolicies keeps the package that changes settings of the whole process (the GC
// percent, forced collections) out of everything but the zkd binary's
// main package: a program embedding the server owns its process.
func TestProcessPolicies(t *testing.T) {
	policies := []string{module + "/internal/runtimepolicy"}
	for _, dir := range packageDirs(t, ".") {
		if dir == "cmd/zkd" {
			continue
		}
		prod, _ := imports(t, dir)
		for _, p := range policies {
			if files, ok := prod[p]; ok {
				t.Errorf("%s imports %s (%s); only cmd/zkd may", dir, p, strings.Join(files, ", "))
			}
		}
	}
}
