package cluster

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/internal/testserver"
)

// TestStartNodeFailureFreesPorts: a member that fails to start gives back
// the ports it had taken, so that a program embedding acktor can try again
// in the same process.
func TestStartNodeFailureFreesPorts(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	ports := testserver.FreePorts(t, 4)
	busy, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[3]))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name  string
		cfg   Config
		freed []int // ports that must be free again after the failure
	}{
		{"etcd away, after the remote listens", Config{Name: "c", Host: "127.0.0.1", Port: ports[0], Provider: "etcd",
			Etcd: EtcdConfig{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", ports[1])}, Prefix: "/t", DialTimeout: 200 * time.Millisecond}},
			[]int{ports[0]}},
		{"remote port busy, after the health check listens", Config{Name: "c", Host: "127.0.0.1", Port: ports[3], Provider: "automanaged",
			Automanaged: AutomanagedConfig{Port: ports[2], Peers: []string{fmt.Sprintf("127.0.0.1:%d", ports[2])}, Refresh: time.Second}},
			[]int{ports[2]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := StartNode(tc.cfg, nil, log)
			if err == nil {
				n.Cluster.Shutdown(false)
				t.Fatal("StartNode succeeded")
			}
			if !strings.Contains(err.Error(), "starting member") {
				t.Errorf("StartNode: %v, want a starting member error", err)
			}
			for _, p := range tc.freed {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					t.Fatalf("port %d still taken after the failure: %v", p, err)
				}
				l.Close()
			}
		})
	}
}
