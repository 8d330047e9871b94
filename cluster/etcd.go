package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/encoding/protojson"
)

// etcdProvider keeps the member list in etcd, in place of Proto.Actor's
// etcd provider. A member puts its key, prefix/name/id, under a lease it
// keeps alive. Members and clients list the keys and then watch them from
// the revision after the list, so that a member registering in between is
// seen: the library's provider watches from whenever its watch starts and
// misses such a member for good. A watch that breaks (etcd restarted, the
// revision compacted) is followed by a fresh list.
//
// A member whose lease ran out (etcd out of reach for longer than the
// lease), or whose key was deleted, is gone for the others for good:
// Proto.Actor blocks the id of a member that left. Registering again would
// not bring it back, so the provider reports it on lost instead, and the
// node stops; a restart joins as a new member. Keep-alives that stop while
// the lease still runs (etcd restarted: it extends the leases) are simply
// started again.
//
// Cluster.Shutdown(false) does not call a provider's Shutdown: a member
// stopped so keeps its key until the process ends and the lease runs out.
type etcdProvider struct {
	client *clientv3.Client
	prefix string // the cluster's keys: Prefix/name/
	ttl    time.Duration
	dial   time.Duration // how long a registration may wait for etcd
	log    *logrus.Logger
	// afterList, if set, runs between a list and its watch (tests).
	afterList func()

	publish func(pcluster.Members)
	self    *pcluster.Member // nil for a client
	key     string           // self's key
	lease   clientv3.LeaseID // self's lease
	lost    chan error       // why this member is gone for the others
	members map[string]*pcluster.Member
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// etcdLeaseTTL is how long a member that stopped keeping its lease alive
// stays in the others' lists.
const etcdLeaseTTL = 3 * time.Second

// etcdRetry is the pause before trying etcd again after it failed us.
const etcdRetry = time.Second

func newEtcdProvider(cfg EtcdConfig, name string, log *logrus.Logger) (*etcdProvider, error) {
	// After a restart etcd extends the leases by only about their TTL, so a
	// member must be back within seconds: gRPC's default reconnect backoff
	// grows to two minutes, ours to a second. The keep-alive pings tear a
	// half-open connection down, so that the member reconnects.
	var tlsc *tls.Config
	if cfg.TLS.On() {
		m, err := cfg.TLS.load("cluster.etcd.tls", log)
		if err != nil {
			return nil, err
		}
		tlsc = m.client
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, TLS: tlsc,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}})}})
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &etcdProvider{client: client, prefix: cfg.Prefix + "/" + name + "/", ttl: etcdLeaseTTL,
		dial: max(cfg.DialTimeout, etcdLeaseTTL), log: log,
		lost: make(chan error, 1), members: map[string]*pcluster.Member{}, ctx: ctx, stop: stop}, nil
}

// StartMember registers this member and starts following the others.
func (p *etcdProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("etcd provider: %w", err)
	}
	return p.join(&pcluster.Member{Id: c.ActorSystem.ID, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()},
		c.MemberList.UpdateClusterTopology)
}

// StartClient follows the members without registering.
func (p *etcdProvider) StartClient(c *pcluster.Cluster) error {
	return p.join(nil, c.MemberList.UpdateClusterTopology)
}

// join registers self, unless nil (a client), and starts following the
// members, handing each list to publish.
func (p *etcdProvider) join(self *pcluster.Member, publish func(pcluster.Members)) error {
	p.publish = publish
	if self == nil {
		p.wg.Add(1)
		go p.follow()
		return nil
	}
	p.self, p.key = self, p.prefix+self.Id
	ka, err := p.register()
	if err != nil {
		_ = p.Shutdown(false)
		return err
	}
	p.wg.Add(2)
	go p.keepRegistered(ka)
	go p.follow()
	return nil
}

// Shutdown stops following and takes this member's key out at once (its
// lease revoked), so that the others need not wait for it to run out. It
// may be called more than once (Leave, then the cluster's shutdown).
func (p *etcdProvider) Shutdown(bool) error {
	var err error
	p.once.Do(func() {
		p.stop()
		p.wg.Wait()
		if p.lease != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), etcdRetry)
			if _, e := p.client.Revoke(ctx, p.lease); e != nil && !errors.Is(e, rpctypes.ErrLeaseNotFound) {
				err = fmt.Errorf("etcd provider: revoking the lease of %s: %w", p.key, e)
			}
			cancel()
		}
		if e := p.client.Close(); e != nil && err == nil {
			err = fmt.Errorf("etcd provider: %w", e)
		}
	})
	return err
}

// register puts this member's key under a new lease and keeps it alive.
func (p *etcdProvider) register() (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	value, err := protojson.Marshal(p.self)
	if err != nil {
		return nil, fmt.Errorf("etcd provider: %w", err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.dial)
	defer cancel()
	g, err := p.client.Grant(ctx, int64(p.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcd provider: a lease for %s: %w", p.key, err)
	}
	p.lease = g.ID
	if _, err := p.client.Put(ctx, p.key, string(value), clientv3.WithLease(g.ID)); err != nil {
		return nil, fmt.Errorf("etcd provider: putting %s: %w", p.key, err)
	}
	ka, err := p.client.KeepAlive(p.ctx, g.ID)
	if err != nil {
		return nil, fmt.Errorf("etcd provider: keeping %s alive: %w", p.key, err)
	}
	return ka, nil
}

// keepRegistered drains the lease's keep-alive answers. When they stop
// before shutdown it asks etcd whether the lease still runs: if so it keeps
// it alive again, if not this member is gone (see etcdProvider).
func (p *etcdProvider) keepRegistered(ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer p.wg.Done()
	for {
		for range ka {
		}
		for {
			if p.ctx.Err() != nil {
				return
			}
			runs, err := p.leaseRuns()
			if err == nil && !runs {
				p.expel(fmt.Errorf("etcd provider: the lease of %s ran out: the other members count this one gone for good", p.key))
				return
			}
			if err == nil {
				if ka, err = p.client.KeepAlive(p.ctx, p.lease); err == nil {
					break
				}
			}
			p.log.WithError(err).Warnf("etcd provider: keeping the lease of %s alive", p.key)
			if !p.pause() {
				return
			}
		}
	}
}

// expel reports, once, why the others count this member gone.
func (p *etcdProvider) expel(err error) {
	select {
	case p.lost <- err:
	default: // reported already
	}
}

// leaseRuns asks etcd whether this member's lease still runs.
func (p *etcdProvider) leaseRuns() (bool, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.dial)
	defer cancel()
	res, err := p.client.TimeToLive(ctx, p.lease)
	if err != nil {
		return false, fmt.Errorf("asking for the lease of %s: %w", p.key, err)
	}
	return res.TTL >= 0, nil // -1: gone; 0: under a second left, still running
}

// follow lists the members and watches for changes until shutdown.
func (p *etcdProvider) follow() {
	defer p.wg.Done()
	for {
		rev, err := p.list()
		if err == nil {
			if p.afterList != nil {
				p.afterList()
			}
			err = p.watch(rev + 1)
		}
		if p.ctx.Err() != nil {
			return
		}
		p.log.WithError(err).Warn("etcd provider: following the members; listing them again")
		if !p.pause() {
			return
		}
	}
}

// pause waits etcdRetry; false means shutdown came first.
func (p *etcdProvider) pause() bool {
	t := time.NewTimer(etcdRetry)
	defer t.Stop()
	select {
	case <-p.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// list reads every member, publishes them, and returns the revision read.
func (p *etcdProvider) list() (int64, error) {
	res, err := p.client.Get(p.ctx, p.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", p.prefix, err)
	}
	clear(p.members)
	for _, kv := range res.Kvs {
		p.put(string(kv.Key), kv.Value)
	}
	if _, ok := p.members[p.key]; p.self != nil && !ok {
		p.gone()
	}
	p.publishMembers()
	return res.Header.Revision, nil
}

// watch applies the changes from revision rev on, publishing after each
// answer, until the watch breaks or shutdown.
func (p *etcdProvider) watch(rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(p.ctx))
	defer cancel()
	for res := range p.client.Watch(ctx, p.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := res.Err(); err != nil {
			return fmt.Errorf("watching %s from revision %d: %w", p.prefix, rev, err)
		}
		for _, ev := range res.Events {
			if ev.Type == clientv3.EventTypeDelete {
				delete(p.members, string(ev.Kv.Key))
				if p.self != nil && string(ev.Kv.Key) == p.key {
					p.gone()
				}
			} else {
				p.put(string(ev.Kv.Key), ev.Kv.Value)
			}
		}
		p.publishMembers()
	}
	return errors.New("the watch closed")
}

// gone reports this member's key deleted, lease or not: the others have
// seen it leave.
func (p *etcdProvider) gone() {
	p.expel(fmt.Errorf("etcd provider: %s is no longer in etcd (its lease ran out, or it was deleted): the other members count this one gone for good", p.key))
}

// put records the member a key holds; a value that is no member is logged
// with its key and left out.
func (p *etcdProvider) put(key string, value []byte) {
	m := &pcluster.Member{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(value, m); err != nil || m.Id == "" || m.Host == "" || m.Port <= 0 {
		p.log.Errorf("etcd provider: %s holds no member (%q): left out", key, value)
		delete(p.members, key)
		return
	}
	p.members[key] = m
}

// publishMembers hands Proto.Actor the members, this one always among
// them: a member whose lease lapsed is still itself.
func (p *etcdProvider) publishMembers() {
	ms := make([]*pcluster.Member, 0, len(p.members)+1)
	for key, m := range p.members {
		if key != p.key {
			ms = append(ms, m)
		}
	}
	if p.self != nil {
		ms = append(ms, p.self)
	}
	p.publish(ms)
}
