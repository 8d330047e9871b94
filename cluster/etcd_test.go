package cluster

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"

	"github.com/acktor/acktor/internal/testserver"
)

// seen records the member lists a provider published.
type seen struct {
	mu   sync.Mutex
	last []string // member ids, sorted
}

func (s *seen) publish(ms pcluster.Members) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.Id
	}
	slices.Sort(ids)
	s.mu.Lock()
	s.last = ids
	s.mu.Unlock()
}

// waitFor fails the test unless the published list becomes want in 10 s.
func (s *seen) waitFor(t *testing.T, who string, want ...string) {
	t.Helper()
	slices.Sort(want)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		last := s.last
		s.mu.Unlock()
		if slices.Equal(last, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sees %v, want %v", who, last, want)
		}
	}
}

func testProvider(t *testing.T, addr string) *etcdProvider {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	p, err := newEtcdProvider(EtcdConfig{Endpoints: []string{addr}, Prefix: "/acktor-test", DialTimeout: 5 * time.Second}, "c", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(true) })
	return p
}

// joined joins p as member id (nil: a client) and returns what it sees.
func joined(t *testing.T, p *etcdProvider, self *pcluster.Member) *seen {
	t.Helper()
	s := &seen{}
	if err := p.join(self, s.publish); err != nil {
		t.Fatal(err)
	}
	return s
}

func member(id string, port int32) *pcluster.Member {
	return &pcluster.Member{Id: id, Host: "127.0.0.1", Port: port, Kinds: []string{"k"}}
}

// TestEtcdMemberJoiningBetweenListAndWatch: a member that registers after
// another has listed the members but before its watch starts is still
// seen by it (Proto.Actor's own etcd provider never sees it).
func TestEtcdMemberJoiningBetweenListAndWatch(t *testing.T) {
	addr := testserver.Etcd(t)
	a, b := testProvider(t, addr), testProvider(t, addr)
	var sa, sb seen
	var once sync.Once
	a.afterList = func() { // the first list only: a broken watch lists again
		once.Do(func() {
			if err := b.join(member("b", 2), sb.publish); err != nil {
				t.Error(err)
			}
		})
	}
	if err := a.join(member("a", 1), sa.publish); err != nil {
		t.Fatal(err)
	}
	sa.waitFor(t, "a", "a", "b")
	sb.waitFor(t, "b", "a", "b")
}

// TestEtcdMembers: members joining at once all see each other, a client
// sees them all, one leaving is gone from the lists at once (its lease
// revoked, no waiting for it to run out), and a key that holds no member
// is left out.
func TestEtcdMembers(t *testing.T) {
	addr := testserver.Etcd(t)
	ids := []string{"m0", "m1", "m2"}
	ps, ss := make([]*etcdProvider, len(ids)), make([]seen, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		ps[i] = testProvider(t, addr)
		wg.Go(func() {
			if err := ps[i].join(member(id, int32(i+1)), ss[i].publish); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range ids {
		ss[i].waitFor(t, ids[i], ids...)
	}
	sc := joined(t, testProvider(t, addr), nil)
	sc.waitFor(t, "the client", ids...)

	if _, err := ps[0].client.Put(context.Background(), ps[0].prefix+"junk", "{not a member"); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	if err := ps[2].Shutdown(true); err != nil {
		t.Fatal(err)
	}
	ss[0].waitFor(t, "m0", "m0", "m1")
	sc.waitFor(t, "the client", "m0", "m1")
	if d := time.Since(left); d >= etcdLeaseTTL {
		t.Errorf("the leaving member was seen gone after %v, no sooner than its lease would run out", d)
	}
}

// TestEtcdLeaseLost: a member whose lease ran out (here revoked behind its
// back, as when etcd was out of reach for longer than the lease) is gone
// for the others, and says so on lost rather than registering again under
// the same id, which Proto.Actor would ignore for good.
func TestEtcdLeaseLost(t *testing.T) {
	addr := testserver.Etcd(t)
	a, b := testProvider(t, addr), testProvider(t, addr)
	joined(t, a, member("a", 1))
	sb := joined(t, b, member("b", 2))
	sb.waitFor(t, "b", "a", "b")
	select {
	case err := <-a.lost:
		t.Fatalf("lost before the lease ran out: %v", err)
	default:
	}
	if _, err := b.client.Revoke(context.Background(), a.lease); err != nil {
		t.Fatal(err)
	}
	sb.waitFor(t, "b", "b")
	select {
	case err := <-a.lost:
		if !strings.Contains(err.Error(), "/acktor-test/c/a") || !strings.Contains(err.Error(), "gone for good") {
			t.Errorf("lost: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a did not report its lease lost in 10 s")
	}
	if err := a.Shutdown(true); err != nil { // the lease is gone already: no error
		t.Errorf("Shutdown after the lease ran out: %v", err)
	}
}

// TestEtcdRestart: etcd killed and started again 10 s later, long past
// the lease, so that the members' clients give their keep-alives up: etcd
// extends the leases by about their TTL when it starts, the members are
// back in time (the reconnect backoff is short) and keep them (none says it
// is lost), and their watches go on: a member joining afterwards is seen by
// both.
func TestEtcdRestart(t *testing.T) {
	etcd := testserver.StartEtcd(t)
	a, b := testProvider(t, etcd.Addr), testProvider(t, etcd.Addr)
	sa, sb := joined(t, a, member("a", 1)), joined(t, b, member("b", 2))
	sa.waitFor(t, "a", "a", "b")
	etcd.Restart(t, 10*time.Second)
	sc := joined(t, testProvider(t, etcd.Addr), member("c", 3))
	sa.waitFor(t, "a", "a", "b", "c")
	sb.waitFor(t, "b", "a", "b", "c")
	sc.waitFor(t, "c", "a", "b", "c")
	select {
	case err := <-a.lost:
		t.Fatalf("a: %v", err)
	case err := <-b.lost:
		t.Fatalf("b: %v", err)
	case <-time.After(etcdLeaseTTL + time.Second): // past the leases' first deadline
	}
	sc.waitFor(t, "c", "a", "b", "c")
}

// TestEtcdKeyDeleted: a member whose key is deleted while its lease runs
// (etcdctl del) is gone for the others too, and says so.
func TestEtcdKeyDeleted(t *testing.T) {
	addr := testserver.Etcd(t)
	a := testProvider(t, addr)
	joined(t, a, member("a", 1)).waitFor(t, "a", "a")
	if _, err := a.client.Delete(context.Background(), a.key); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.lost:
		if !strings.Contains(err.Error(), "no longer in etcd") {
			t.Errorf("lost: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a did not report its key deleted in 10 s")
	}
}

// TestEtcdCompactedWatch: the revision after a list is compacted away
// before the watch starts (the watch fails at once): the provider lists
// again and sees the member that joined meanwhile.
func TestEtcdCompactedWatch(t *testing.T) {
	addr := testserver.Etcd(t)
	a, b := testProvider(t, addr), testProvider(t, addr)
	var sa, sb seen
	var once sync.Once
	a.afterList = func() {
		once.Do(func() {
			if err := b.join(member("b", 2), sb.publish); err != nil {
				t.Error(err)
			}
			res, err := b.client.Put(context.Background(), "/acktor-test/other", "x")
			if err == nil {
				_, err = b.client.Compact(context.Background(), res.Header.Revision)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := a.join(nil, sa.publish); err != nil {
		t.Fatal(err)
	}
	sa.waitFor(t, "a", "b")
}

func TestEtcdRegisterFails(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	port := testserver.FreePorts(t, 1)[0] // nothing listens there
	p, err := newEtcdProvider(EtcdConfig{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", port)}, Prefix: "/x",
		DialTimeout: 200 * time.Millisecond}, "c", log)
	if err != nil {
		t.Fatal(err)
	}
	p.dial = 300 * time.Millisecond
	err = p.join(member("a", 1), func(pcluster.Members) {})
	if err == nil || !strings.Contains(err.Error(), "a lease for /x/c/a") {
		t.Fatalf("join with etcd away: %v", err)
	}
	_ = p.Shutdown(true) // a second time: a no-op
}

// TestEtcdTLS: against an etcd that serves TLS and takes only clients with
// a certificate its authority signed, a member with cluster.etcd.tls
// registers and sees itself; one with another authority's certificate, or
// with no TLS, does not register.
func TestEtcdTLS(t *testing.T) {
	dir := t.TempDir()
	f := testserver.Certs(t, dir, "etcd")
	stranger := testserver.Certs(t, dir, "stranger")
	etcd := testserver.StartEtcdTLS(t, f)
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, tc := range []struct {
		name string
		tls  TLSConfig
		ok   bool
	}{
		{"the authority's certificate", TLSConfig{CA: f.CA, Cert: f.Cert, Key: f.Key}, true},
		{"another authority's certificate", TLSConfig{CA: f.CA, Cert: stranger.Cert, Key: stranger.Key}, false},
		{"no TLS", TLSConfig{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newEtcdProvider(EtcdConfig{Endpoints: []string{etcd.Addr}, Prefix: "/tls", DialTimeout: time.Second, TLS: tc.tls}, "c", log)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Shutdown(true) }()
			p.dial = time.Second
			s := &seen{}
			err = p.join(member("a", 1), s.publish)
			if (err == nil) != tc.ok {
				t.Fatalf("join: %v", err)
			}
			if tc.ok {
				s.waitFor(t, "a", "a")
			}
		})
	}
}
