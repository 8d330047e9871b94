package assert

import (
	"errors"
	"testing"
)

func TestThat(t *testing.T) {
	That(true, "never")
	defer func() {
		r := recover()
		var inv Invariant
		if err, ok := r.(error); !ok || !errors.As(err, &inv) || inv.What != "n = -1" {
			t.Fatalf("recovered %v, want the invariant n = -1", r)
		}
	}()
	if n := -1; n < 0 {
		Failf("n = %d", n)
	}
	t.Fatal("That(false) returned")
}
