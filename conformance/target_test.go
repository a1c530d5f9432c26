package conformance

import "testing"

func TestParseCapabilities(t *testing.T) {
	got, err := ParseCapabilities(" ttl, reconfig ,4lw,fastreap,super=u:p,")
	if err != nil {
		t.Fatalf("ParseCapabilities: %v", err)
	}
	want := Capabilities{TTL: true, Reconfig: true, AllFourLetterWords: true, FastReap: true, SuperAuth: "u:p"}
	if got != want {
		t.Fatalf("ParseCapabilities gave %+v; want %+v", got, want)
	}
	if got, err := ParseCapabilities(""); err != nil || got != (Capabilities{}) {
		t.Fatalf("ParseCapabilities(\"\") gave %+v, %v; want none", got, err)
	}
	if _, err := ParseCapabilities("ttl,fast-reap"); err == nil {
		t.Fatalf("ParseCapabilities accepted an unknown capability")
	}
}
