package main

import (
	"strings"
	"testing"
)

func TestRenderBuildsOneRowPerCheckAndOneColumnPerTarget(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Test":"TestWatches/zookeeper/a_check"}`,
		`{"Action":"pass","Test":"TestWatches/zookeeper/a_check"}`,
		`{"Action":"fail","Test":"TestWatches/zkd/a_check"}`,
		`{"Action":"skip","Test":"TestTTL/zkd/ttl_check"}`,
		`{"Action":"pass","Test":"TestWatches/zookeeper"}`,
		`{"Action":"pass","Test":"TestWatches"}`,
		`not json`,
	}, "\n")
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"- zookeeper: 1 pass, 0 fail, 0 skip\n",
		"- zkd: 0 pass, 1 fail, 1 skip\n",
		"| check | zookeeper | zkd |\n|---|---|---|\n",
		"| TTL/ttl_check | – | skip |\n",
		"| Watches/a_check | pass | **FAIL** |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("matrix lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "TTL/ttl_check") > strings.Index(got, "Watches/a_check") {
		t.Errorf("rows are not sorted:\n%s", got)
	}
}

func TestRunRejectsInputWithoutResults(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(`{"Action":"pass","Test":"TestX"}`), &out); err == nil {
		t.Fatalf("run accepted input with no conformance results")
	}
}

func TestKeptSectionCarriesTheClientMatrixOver(t *testing.T) {
	doc := "# Compatibility matrix\n\n| a |\n\n" + keepBegin + "\n## Clients\n| x |\n" + keepEnd + "\n"
	if got, want := keptSection(doc), keepBegin+"\n## Clients\n| x |\n"+keepEnd+"\n"; got != want {
		t.Fatalf("keptSection = %q, want %q", got, want)
	}
	if got := keptSection("# no section\n"); got != "" {
		t.Fatalf("keptSection of a doc without the section = %q", got)
	}
}
