package testserver

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// Promtool checks a Prometheus exposition with the system's promtool
// (Debian's prometheus package): it fails the test with promtool's words
// for each problem. Without promtool the test skips, unless
// ACKTOR_REQUIRE_PROMTOOL=1 (set by .ci/run) makes that a failure.
func Promtool(t testing.TB, exposition []byte) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("ACKTOR_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("promtool not found and ACKTOR_REQUIRE_PROMTOOL=1: install Debian's prometheus")
		}
		t.Skip("promtool not found: install Debian's prometheus (apt-get install prometheus) to run this check")
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
