package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/acktor/acktor/gateway"
	"github.com/acktor/acktor/internal/testserver"
	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/topologies/speedlayer"
	"github.com/acktor/acktor/window"
)

// speedlayerOrders is the stream the broker tests write: orders of 12
// zones and 5000 riders.
var speedlayerOrders = speedlayer.OrdersConfig{Zones: 12, Riders: 5000, Seed: 3}

// runSpeedlayerNodes runs the speed layer as a batch job over three
// `acktor node` processes whose job section reads source (the lines after
// "  source: ..."), and checks the driver's zones against the truth of the
// first n orders: orders and fares exactly (the job is exactly once),
// distinct riders within the HyperLogLog's error, repeat riders within
// Bloom's false positives. With endless, the source does not end: once the
// driver reports n roots completed it gets SIGTERM, and must end the job
// on every member and write the zones.
func runSpeedlayerNodes(t *testing.T, n int64, source string, endless bool) {
	t.Helper()
	dir := t.TempDir()
	ports := testserver.FreePorts(t, 3)
	var peers []string
	for _, p := range ports {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", p))
	}
	out := filepath.Join(dir, "zones.tsv")
	var paths []string
	for i, p := range ports {
		cfg := fmt.Sprintf(`cluster:
  name: speedlayer
  provider: automanaged
  automanaged:
    port: %d
    peers: [%s]
    refresh: 500ms
tracker:
  ackers: 3
  timeout: 5s
  progress: log
job:
  topology: speedlayer
  driver: %v
  members: 3
  spouts: 3
  exactly_once: true
  output: %s
%s`, p, strings.Join(peers, ", "), i == 0, out, source)
		paths = append(paths, filepath.Join(dir, fmt.Sprintf("node%d.yaml", i)))
		if err := os.WriteFile(paths[i], []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range paths[1:] {
		startNode(t, p)
	}
	driver, log := startNode(t, paths[0])
	if endless {
		want := fmt.Sprintf("roots %d/", n)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if b, _ := os.ReadFile(log.Name()); strings.Contains(string(b), want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the driver did not report %q in 60 s", want)
			}
		}
		if err := driver.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	if err := driver.Wait(); err != nil {
		b, _ := os.ReadFile(paths[0] + ".log")
		t.Fatalf("driver: %v\n%s", err, b)
	}
	checkZones(t, out, speedlayer.Truth(speedlayerOrders, n))
}

// checkZones reads zone<TAB>orders<TAB>fares<TAB>distinct<TAB>repeats lines
// from path and compares them with truth.
func checkZones(t *testing.T, path string, truth map[string]speedlayer.ZoneTruth) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	seen := 0
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "\t")
		if len(fs) != 5 {
			t.Fatalf("line %q: want 5 fields", sc.Text())
		}
		var v [4]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(fs[i+1], 10, 64); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
		}
		want, ok := truth[fs[0]]
		switch {
		case !ok:
			t.Fatalf("zone %s is in no order", fs[0])
		case v[0] != want.Orders || v[1] != want.Fares:
			t.Errorf("%s: %d orders, %d fares; truth %d, %d", fs[0], v[0], v[1], want.Orders, want.Fares)
		case math.Abs(float64(v[2])-float64(want.Distinct)) > 0.05*float64(want.Distinct)+2:
			t.Errorf("%s: %d distinct riders, truth %d", fs[0], v[2], want.Distinct)
		case v[3] < want.Repeats || float64(v[3]) > float64(want.Repeats)*1.03+3:
			t.Errorf("%s: %d repeat riders, truth %d", fs[0], v[3], want.Repeats)
		}
		seen++
	}
	if seen != len(truth) {
		t.Fatalf("%d zones written, truth has %d", seen, len(truth))
	}
}

// TestNodeSpeedlayerKafka: the speed layer over a Kafka topic of three
// partitions (kfake, with TLS and SASL PLAIN) on three `acktor node`
// processes: the group's partitions spread over the three spout tasks,
// wherever they run, and the zones are the truth.
func TestNodeSpeedlayerKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	const n = 6000
	certs := testserver.Certs(t, t.TempDir(), "kafka")
	pair, err := tls.LoadX509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}}),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "acktor", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clientTLS, err := member.TLSConfig{CA: certs.CA}.Config("tls")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DialTLSConfig(clientTLS),
		kgo.SASL(plain.Auth{User: "acktor", Pass: "s3cret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Value: []byte(speedlayerOrders.Gen(uint64(i)).String())}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFKA_PASSWORD", "s3cret") // the members inherit it
	runSpeedlayerNodes(t, n, fmt.Sprintf(`  source: kafka
  kafka:
    brokers: [%s]
    topics: [orders]
    group: speedlayer
    stop_at_end: true
    tls:
      ca: %s
    sasl:
      mechanism: plain
      user: acktor
      password_env: KAFKA_PASSWORD
`, strings.Join(c.ListenAddrs(), ", "), certs.CA), false)
}

// TestNodeSpeedlayerJetStream: the speed layer over a JetStream stream of
// the system's nats-server (Debian's 2.9) on three `acktor node` processes,
// one durable consumer shared by the three spout tasks: reading what the
// stream holds (stop_at_end), and reading until SIGTERM stops the job.
func TestNodeSpeedlayerJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	const n = 6000
	url := testserver.NatsServer(t)
	publishOrders(t, url, n)
	for _, endless := range []bool{false, true} {
		t.Run(fmt.Sprintf("endless=%v", endless), func(t *testing.T) {
			runSpeedlayerNodes(t, n, fmt.Sprintf(`  source: jetstream
  jetstream:
    url: %s
    stream: ORDERS
    consumer: speedlayer-%v
    stop_at_end: %v
`, url, endless, !endless), endless)
		})
	}
}

// TestNodeService: the speed layer as a service (job.mode service, no
// driver) on three `acktor node` processes started at once, over a
// JetStream stream on the system's nats-server and over a Kafka topic on
// kfake: whichever member leads starts the job, once; the counter tasks
// spread over the members, and each member's gateway answers for all of
// them with the truth. A fourth member joins, then one leaves (SIGTERM),
// each while orders stream in:
// tasks, ackers and counters move with their state, and the zones stay the
// truth, exactly, on every member. Then the member hosting the most counter
// tasks is killed (kill -9) mid-stream: its counter tasks start again from
// their standbys, every order is read (and, over JetStream, acknowledged),
// and the zones are the truth again, exactly, nothing dead-lettered. Last,
// the dead member comes back on its address (as a new member) and the
// zones stay the truth.
func TestNodeService(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	t.Run("jetstream", func(t *testing.T) {
		url := testserver.NatsServer(t)
		serviceNodes(t, fmt.Sprintf("  source: jetstream\n  jetstream:\n    url: %s\n    stream: ORDERS\n    consumer: service\n    ack_wait: 5s\n", url),
			func(from, to uint64) { publishMore(t, url, from, to) }, func() { waitConsumed(t, url, "service") })
	})
	t.Run("kafka", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		publish := func(from, to uint64) {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte(speedlayerOrders.Gen(i).String())})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		serviceNodes(t, fmt.Sprintf("  source: kafka\n  kafka:\n    brokers: [%s]\n    topics: [orders]\n    group: service\n    session_timeout: 6s\n",
			strings.Join(c.ListenAddrs(), ", ")), publish, func() {}) // the counts after the kill tell it all
	})
}

// serviceNodes runs the speed layer service over the source section
// (the job's lines from "  source: ..."): three members, orders published
// with publish, a join, a leave, and a kill -9 of the member hosting the
// most counter tasks, after which consumed must see every order
// acknowledged and every zone is exact still (exactly once): the dead
// member's counter tasks start again from their standbys.
func serviceNodes(t *testing.T, source string, publish func(from, to uint64), consumed func()) {
	const n = 4000
	publish(0, n)
	dir := t.TempDir()
	ports := testserver.FreePorts(t, 12) // health, gateway and remote ports of four members
	var peers, gateways []string
	for _, p := range ports[:4] {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", p))
	}
	var members []*exec.Cmd
	start := func(i int) {
		gateways = append(gateways, fmt.Sprintf("127.0.0.1:%d", ports[4+i]))
		cfg := fmt.Sprintf(`cluster:
  name: service
  port: %d
  automanaged:
    port: %d
    peers: [%s]
    refresh: 500ms
tracker:
  ackers: 3
  timeout: 5s
gateway:
  address: %s
job:
  topology: speedlayer
  mode: service
  spouts: 3
  counters: 4
  exactly_once: true
%s`, ports[8+i], ports[i], strings.Join(peers, ", "), gateways[i], source)
		path := filepath.Join(dir, fmt.Sprintf("node%d.yaml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		m, _ := startNode(t, path)
		members = append(members, m)
	}
	for i := range 3 {
		start(i)
	}
	check := func(orders uint64, live []int, when string) {
		t.Helper()
		truth := speedlayer.Truth(speedlayerOrders, int64(orders))
		for _, i := range live {
			zones, a := waitZones(t, "http://"+gateways[i], orders)
			for zone, want := range truth {
				if got := zones[zone]; got.Count != want.Orders || uint64(got.Sum) != want.Fares {
					t.Errorf("%s, gateway %d: %s: %d orders, %d fares; truth %d, %d", when, i, zone, got.Count, got.Sum, want.Orders, want.Fares)
				}
				// The sketch columns move too: distinct riders within the
				// HyperLogLog's error, repeats within Bloom's false positives.
				if d := a.Distinct[zone]; math.Abs(float64(d)-float64(want.Distinct)) > 0.05*float64(want.Distinct)+2 {
					t.Errorf("%s, gateway %d: %s: %d distinct riders, truth %d", when, i, zone, d, want.Distinct)
				}
				if r := a.Repeats[zone]; r < want.Repeats || float64(r) > float64(want.Repeats)*1.03+3 {
					t.Errorf("%s, gateway %d: %s: %d repeat riders, truth %d", when, i, zone, r, want.Repeats)
				}
			}
		}
	}
	// trickle publishes orders [from, to) over about 4 s, aside, so that
	// a member joins or leaves while they stream in; wait for the end
	// with the func it returns.
	trickle := func(from, to uint64) func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			const steps = 20
			for i := range uint64(steps) {
				publish(from+(to-from)*i/steps, from+(to-from)*(i+1)/steps)
				time.Sleep(200 * time.Millisecond)
			}
		}()
		return func() { <-done }
	}
	check(n, []int{0, 1, 2}, "three members")
	streamed := trickle(n, 2*n)
	time.Sleep(time.Second)
	start(3) // a fourth joins mid-stream
	streamed()
	check(2*n, []int{0, 1, 2, 3}, "after a join")
	streamed = trickle(2*n, 3*n)
	time.Sleep(time.Second)
	if err := members[1].Process.Signal(syscall.SIGTERM); err != nil { // one leaves mid-stream
		t.Fatal(err)
	}
	if err := members[1].Wait(); err != nil {
		t.Fatalf("the member that left: %v", err)
	}
	streamed()
	check(3*n, []int{0, 2, 3}, "after a leave")
	// Kill the live member that hosts the most counter tasks.
	st := status(t, gateways[0])
	hosts := map[string]int{}
	for _, k := range st.CounterTasks {
		hosts[k.Member]++
	}
	victim := 2
	for _, i := range []int{0, 2, 3} {
		if hosts[fmt.Sprintf("127.0.0.1:%d", ports[8+i])] > hosts[fmt.Sprintf("127.0.0.1:%d", ports[8+victim])] {
			victim = i
		}
	}
	t.Logf("killing member %d, which hosts %d of the counter tasks: %+v", victim, hosts[fmt.Sprintf("127.0.0.1:%d", ports[8+victim])], st.CounterTasks)
	// Mid-stream: half the next orders are published, and on their way.
	publish(3*n, 3*n+n/2)
	killed := time.Now()
	if err := members[victim].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc([]int{0, 2, 3}, func(i int) bool { return i == victim })
	// While the cluster has not noticed the death yet, the other members
	// answer on time: the counters name the tasks that did not answer (all
	// of them, with 504, when every one lived on the dead member), and the
	// status says which ackers did not. A complete answer is on time too:
	// a call to a task on the dead member waits in the queue to its address
	// until Proto.Actor gives the address up (up to 2 s a retry), and when
	// the task has moved by then, the call asked again reaches it and the
	// answer is whole, just inside the gateway's 3 s.
	for _, path := range []string{"/api/counters/zones?top=5", "/api/status"} {
		began := time.Now()
		res, err := http.Get("http://" + gateways[live[0]] + path)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Missing   []string `json:"missing"`
			AckerErr  string   `json:"acker_error"`
			ErrorText string   `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&a)
		res.Body.Close()
		took := time.Since(began)
		partial := res.StatusCode == http.StatusOK || (res.StatusCode == http.StatusGatewayTimeout && len(a.Missing) == 4)
		if took > 4*time.Second || !partial {
			t.Errorf("GET %s just after a kill: %s in %v (missing %v, acker error %q, error %q), want an answer within 4 s naming what did not answer",
				path, res.Status, took, a.Missing, a.AckerErr, a.ErrorText)
		}
		t.Logf("GET %s just after a kill: %s in %v, missing %v, acker error %q", path, res.Status, took, a.Missing, a.AckerErr)
	}
	publish(3*n+n/2, 4*n)
	consumed()
	// The dead member's counter tasks started again on the others from
	// their standbys' state: every zone is exact still.
	check(4*n, live, "after a kill")
	t.Logf("every zone exact %v after the kill (%d orders published before it, %d after)", time.Since(killed).Round(time.Millisecond), n/2, n/2)
	// What the crash cost in replays: the roots in flight through the dead
	// member (as the lead counts them, from the start if the lead died).
	if after := status(t, gateways[live[0]]); after.Run != nil && st.Run != nil {
		t.Logf("replayed: %d roots before the kill, %d after (%d orders in all)", st.Run.Replayed, after.Run.Replayed, 4*n)
	}
	for _, i := range live {
		if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.yaml.log", i))); err != nil || strings.Contains(string(b), `msg="dead letter:`) { // a root given up on
			t.Fatalf("member %d dead-lettered (or its log: %v):\n%s", i, err, b)
		}
	}
	// The dead member comes back on its address, as a new member: it takes
	// its share of the tasks (and their state) and nothing counts twice.
	// Members that learn of it first send it a counter task's input before
	// the task's old member moves the task there; the new activation claims
	// it and waits for its state (the repeat riders came out 5-12 % low when
	// it applied that input to an empty Bloom filter).
	members[victim], _ = startNode(t, filepath.Join(dir, fmt.Sprintf("node%d.yaml", victim)))
	time.Sleep(2 * time.Second)
	publish(4*n, 5*n)
	consumed()
	check(5*n, append(live, victim), "after the dead member came back")
}

// waitConsumed waits until the durable consumer of ORDERS on url has
// every message acknowledged (60 s at most).
func waitConsumed(t *testing.T, url, consumer string) {
	t.Helper()
	js := jetStreamAt(t, url)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := js.Consumer(ctx, "ORDERS", consumer)
		var info *jetstream.ConsumerInfo
		if err == nil {
			info, err = c.Info(ctx)
		}
		cancel()
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s: not every order acknowledged in 60 s: %+v, %v", consumer, info, err)
		}
	}
}

// jetStreamAt connects to the NATS server at url for the test.
func jetStreamAt(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publishOrders publishes the first n orders of speedlayerOrders to the
// stream ORDERS on url, which it makes.
func publishOrders(t *testing.T, url string, n uint64) { publishMore(t, url, 0, n) }

// publishMore publishes orders from..to-1 of speedlayerOrders to the stream
// ORDERS on url, which it makes when from is 0.
func publishMore(t *testing.T, url string, from, to uint64) {
	t.Helper()
	js := jetStreamAt(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if from == 0 {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < to; i++ {
		if _, err := js.PublishAsync("orders", []byte(speedlayerOrders.Gen(i).String())); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing the orders took over 30 s")
	}
}

// waitZones asks the gateway at base for the zones until they hold n
// orders (60 s at most), and returns them by zone.
func waitZones(t *testing.T, base string, n uint64) (map[string]window.Entry, *gateway.CounterAnswer) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var a gateway.CounterAnswer
		if res, err := http.Get(base + "/api/counters/zones?top=1000"); err == nil {
			err = json.NewDecoder(res.Body).Decode(&a)
			res.Body.Close()
			zones, total := map[string]window.Entry{}, uint64(0)
			for _, e := range a.Top {
				zones[e.Key], total = e, total+e.Count
			}
			if err == nil && total >= n {
				return zones, &a
			}
		}
		if time.Now().After(deadline) {
			var total uint64
			for _, e := range a.Top {
				total += e.Count
			}
			t.Fatalf("%s: the zones did not reach %d orders in 60 s (%d, missing %v)", base, n, total, a.Missing)
		}
	}
}

// TestNodeOtherJob: a member started into a cluster with another job (one
// setting differs) says which setting and which member, exits 2 before it
// runs anything, and takes nothing of the running service: its counts go
// on.
func TestNodeOtherJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dir := t.TempDir()
	ports := testserver.FreePorts(t, 3)
	write := func(i, counters int) string { return otherJobConfig(t, dir, ports, i, counters) }
	startNode(t, write(0, 4))
	base := "http://" + fmt.Sprintf("127.0.0.1:%d", ports[2])
	_, _ = waitZones(t, base, 100)
	err := acktor(t, "node", "--config", write(1, 3))
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "job.counters: 3 here, 4 on member 127.0.0.1:") {
		t.Fatalf("the member with another job: %v, want exit 2 naming job.counters and the member", err)
	}
	zones, _ := waitZones(t, base, 100)
	_, _ = waitZones(t, base, total(zones)+500) // the service goes on, all its counters with it
}

// otherJobConfig writes the config of member i of a two-member speed
// layer service with counters counter tasks (ports: the two members'
// health ports, then member 0's gateway).
func otherJobConfig(t *testing.T, dir string, ports []int, i, counters int) string {
	t.Helper()
	gateway := ""
	if i == 0 {
		gateway = fmt.Sprintf("gateway:\n  address: 127.0.0.1:%d\n", ports[2])
	}
	cfg := fmt.Sprintf(`cluster:
  name: other
  automanaged:
    port: %d
    peers: [127.0.0.1:%d, 127.0.0.1:%d]
    refresh: 500ms
%sjob:
  topology: speedlayer
  mode: service
  source: generator
  lines: 100000000
  rate: 500
  counters: %d
`, ports[i], ports[0], ports[1], gateway, counters)
	path := filepath.Join(dir, fmt.Sprintf("node%d.yaml", i))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNodeOtherJobAtOnce: two members with different jobs started at the
// same moment: a member that refuses the other names the setting that
// differs and the member, though the other had not yet served its job's
// settings when it first asked.
func TestNodeOtherJobAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dir := t.TempDir()
	ports := testserver.FreePorts(t, 3)
	var cmds []*exec.Cmd
	for i, counters := range []int{4, 3} {
		c, _ := startNode(t, otherJobConfig(t, dir, ports, i, counters))
		cmds = append(cmds, c)
	}
	refused := make(chan int, 2)
	for i, c := range cmds {
		go func() {
			if err := c.Wait(); err != nil {
				refused <- i
			}
		}()
	}
	select {
	case i := <-refused:
		time.Sleep(200 * time.Millisecond) // its log is written
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.yaml.log", i)))
		if cmds[i].ProcessState.ExitCode() != 2 || !regexp.MustCompile(`job.counters: [34] here, [34] on member 127\.0\.0\.1:\d+`).Match(b) {
			t.Fatalf("member %d exited %d without naming job.counters and the other member:\n%s", i, cmds[i].ProcessState.ExitCode(), b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("neither member refused the other's job in 20 s")
	}
}

// status is a member's /api/status.
func status(t *testing.T, addr string) *gateway.Status {
	t.Helper()
	res, err := http.Get("http://" + addr + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st gateway.Status
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func total(zones map[string]window.Entry) uint64 {
	var n uint64
	for _, e := range zones {
		n += e.Count
	}
	return n
}
