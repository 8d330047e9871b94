package main

import (
	"errors"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/acktor/acktor/member"
	"github.com/acktor/acktor/topologies/speedlayer"
	"github.com/acktor/acktor/topologies/wordcount"
)

// builtins are the topologies the binary registers.
func builtins() []member.Topology {
	return []member.Topology{wordcount.Topology(), speedlayer.Topology()}
}

func newNode(log *logrus.Logger) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "node --config FILE",
		Short: "Run one member of a multi-machine acktor cluster",
		Long: `Starts one cluster member as the config file describes: where it listens,
how it finds the other members, the tracker's settings and the job the
cluster runs: job.topology wordcount (the default) or speedlayer, over
job.source file, generator, ingest, kafka or jetstream. Every member carries
the same job.

job.mode batch (the default): the member with job.driver: true waits for
job.members members, runs the job and writes its results, then leaves; the
others host the job's spout tasks, processor tasks and ackers until they are
stopped (SIGINT or SIGTERM: they leave gracefully). The driver alone hosts
the counters, whose state is the result.

job.mode service: no driver and no end. Every member runs the job until it
is stopped; whichever member leads starts what does not run. Counter tasks
spread over the members, each with a standby replica on another
(job.standby), and any member's gateway answers for all of them. Members
join, leave (SIGTERM) and die while it runs; one member alone is a cluster.

Over a source that does not end by itself (kafka or jetstream without
stop_at_end, the ingest log) the job runs until the driver gets SIGINT or
SIGTERM: then every spout task, on whichever member, reads no more, the roots
in flight finish, the sources commit, and the results are written.

A member that dies mid-run: the others notice within the membership's
detection time (cluster.automanaged.refresh, or etcd's lease) and replay at
once the roots whose acker lived there; its spout tasks start again on
another member from their last checkpoint (a file's or the generator's
position) or their broker's committed position, and a service's counter
tasks from their standbys. Every line is still processed, at least once, and
exactly once into the counters with job.exactly_once.

With an ingest section (ingest.dir, which needs gateway.address) the gateway
takes records: POST /api/ingest (text/plain, one record per line;
application/x-ndjson; application/json, a string or an array of strings) and
GET /api/ingest/ws (a WebSocket, one record per text message, or a JSON array
per message with ?batch=json). Each request is appended to a segmented,
checksummed log in ingest.dir and answered 200 {"first": offset, "count": n}
only once durable: ingest.sync every fsyncs each append (concurrent ones share
an fsync), grouped shares one fsync per ingest.group (default 2ms) and delays
the answer until then. A torn tail left by a crash is truncated at start, with
a warning. GET /api/ingest shows the log's offsets and its readers.

With job.source: ingest (one member: job.members 1, job.spouts 1) the word
count reads that log as reader "wordcount" instead of job.input. Its
committed offset advances past finished roots only; segments behind every
reader's committed offset are deleted, and ingest.retention_bytes and
ingest.retention_age delete the oldest ones whether read or not. The job runs
until SIGINT or SIGTERM: the gateway stops taking records, the spout reads no
more, the roots in flight finish (for at most twice tracker.timeout, at least
5s; a second signal aborts), the offset is committed, then job.output and
job.stats are written (the output is replaced only then). They cover what this
process counted: the records from the offset committed when it started. After
a crash (kill -9) the next start reads again from the last commit, so every
record that got a 200 is processed at least once; the counts the crashed
process held in memory are lost with it. job.exactly_once drops what replays
bring again within one process, so its output counts each record it read once;
it does not carry counts across a crash.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := member.Load(path)
			if err != nil {
				return &exitError{code: 2, msg: "--config " + err.Error()}
			}
			return exitOf(member.Run(cmd.Context(), cfg, log, builtins()...), nil)
		},
	}
	cmd.Flags().StringVar(&path, "config", "acktor.yaml", "the node's YAML config file")
	return cmd
}

// exitOf is the exit of a member's run: 2 for a setting in error (named by
// its flag, where flags has one for its key), 1 for anything else.
func exitOf(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	var se *member.SettingError
	if errors.As(err, &se) {
		if f, ok := flags[se.Key]; ok {
			return &exitError{code: 2, msg: f + se.Rest}
		}
		return &exitError{code: 2, msg: err.Error()}
	}
	return &exitError{code: 1, msg: err.Error()}
}
