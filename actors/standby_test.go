package actors

import (
	"testing"

	"github.com/acktor/acktor/cluster/grain"
)

// TestKindStandby: the placement puts KindStandby's grains on the
// runner-up of KindCounter's only if it reads it as that kind's standby.
func TestKindStandby(t *testing.T) {
	if base, ok := grain.StandbyOf(KindStandby); KindStandby != grain.StandbyKind(KindCounter) || !ok || base != KindCounter {
		t.Fatalf("KindStandby %q is not the placement's standby kind of %q", KindStandby, KindCounter)
	}
}
