package member

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/acktor/acktor/cluster"
	"github.com/acktor/acktor/messages"
)

// jobActor is the name of the actor that tells a member's job.
const jobActor = "acktor-job"

// sharedText is what every member of a cluster must carry alike, as YAML:
// the tracker's settings and the job, but what is a member's own (the
// driver, its outputs, its progress display) and secrets.
func (c Config) sharedText() string {
	t, j := c.Tracker, c.Job
	t.Progress, t.WaitMembers = "", 0
	j.Driver, j.Members, j.Output, j.Stats = false, 0, "", ""
	j.Kafka.SASL.Password, j.JetStream.Password = "", ""
	// The topology's own settings as values, not as the file spelled them
	// (comments, quotes, styles).
	options := map[string]any{}
	for k, n := range j.Options {
		var v any
		if err := n.Decode(&v); err != nil {
			v = n.Value
		}
		options[k] = v
	}
	j.Options = nil
	b, err := yaml.Marshal(struct {
		Tracker TrackerConfig  `yaml:"tracker"`
		Job     JobConfig      `yaml:"job"`
		Options map[string]any `yaml:"options"`
	}{t, j, options})
	if err != nil { // plain values: cannot fail
		return fmt.Sprint(t, j)
	}
	return string(b)
}

// fingerprint names the job in the members' kinds (cluster.JobKind).
func fingerprint(text string) string {
	h := fnv.New64a()
	h.Write([]byte(text))
	return fmt.Sprintf("%016x", h.Sum64())
}

// serveJob answers other members' JobRequests with text.
func serveJob(sys *actor.ActorSystem, text string) error {
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.JobRequest); ok {
			ctx.Respond(&messages.JobText{Yaml: text})
		}
	}), jobActor)
	return err
}

// checkJob looks, for wait (or until it sees peers members, if peers > 0),
// at the members this one sees and fails with a
// *SettingError naming the first setting a member carries otherwise, and
// the member: the placement gives such a member no grain, so it must not
// start a job of its own. Members that come later with another job are
// logged by watchJobs instead.
func checkJob(ctx context.Context, c *pcluster.Cluster, text string, wait time.Duration, peers int) error {
	job := fingerprint(text)
	for deadline := time.Now().Add(wait); ; {
		ms := c.MemberList.Members().Members()
		for _, m := range ms {
			if other := cluster.JobOf(m); other != "" && other != job {
				return jobDiff(c, m.Address(), text)
			}
		}
		if time.Now().After(deadline) || peers > 0 && len(ms) >= peers {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchJobs logs, once each, the members that join with another job; they
// get no grain of this one.
func watchJobs(c *pcluster.Cluster, text string, log logrus.FieldLogger) func() {
	job, told := fingerprint(text), map[string]bool{}
	sub := c.ActorSystem.EventStream.Subscribe(func(evt any) {
		t, ok := evt.(*pcluster.ClusterTopology)
		if !ok {
			return
		}
		for _, m := range t.Joined {
			if other := cluster.JobOf(m); other != "" && other != job && !told[m.Address()] {
				told[m.Address()] = true
				go func() {
					log.WithError(jobDiff(c, m.Address(), text)).Error("member: a member with another job joined; it gets no task of this one")
				}()
			}
		}
	})
	return func() { c.ActorSystem.EventStream.Unsubscribe(sub) }
}

// jobAskFor is how long jobDiff asks a member for its job.
const jobAskFor = 3 * time.Second

// jobDiff is the error that says how the job of the member at addr
// differs from text.
func jobDiff(c *pcluster.Cluster, addr, text string) error {
	var res any
	var err error
	// A member that starts at the same moment joins before it serves its
	// job's text: ask again for a while rather than name no setting.
	for deadline := time.Now().Add(jobAskFor); ; time.Sleep(200 * time.Millisecond) {
		res, err = c.ActorSystem.Root.RequestFuture(actor.NewPID(addr, jobActor), &messages.JobRequest{}, time.Second).Result()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	jt, ok := res.(*messages.JobText)
	if err != nil || !ok {
		return setting("job", ": member %s carries another job (it did not say which: %v); every member must carry the same job and tracker settings", addr, err)
	}
	var mine, theirs map[string]any
	_ = yaml.Unmarshal([]byte(text), &mine)
	_ = yaml.Unmarshal([]byte(jt.Yaml), &theirs)
	key, here, there := firstDiff(mine, theirs, "")
	if key == "" {
		return setting("job", ": member %s carries another job, though no setting differs here from there (another version of acktor?)", addr)
	}
	key = strings.Replace(key, "options.", "job.", 1) // the topology's settings are job keys
	return setting(key, ": %v here, %v on member %s; every member must carry the same job and tracker settings", here, there, addr)
}

// firstDiff is the first key path, in sorted order, where a and b differ,
// with the two values.
func firstDiff(a, b map[string]any, at string) (string, any, any) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		path := k
		if at != "" {
			path = at + "." + k
		}
		va, vb := a[k], b[k]
		ma, oka := va.(map[string]any)
		mb, okb := vb.(map[string]any)
		if oka && okb {
			if key, x, y := firstDiff(ma, mb, path); key != "" {
				return key, x, y
			}
			continue
		}
		if fmt.Sprint(va) != fmt.Sprint(vb) {
			return path, show(va), show(vb)
		}
	}
	return "", nil, nil
}

// show is a value as the error prints it.
func show(v any) any {
	if v == nil {
		return "(none)"
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return v
}
