package member

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/acktor/acktor/source"
	"github.com/acktor/acktor/source/jetstream"
	"github.com/acktor/acktor/source/kafka"
)

// KafkaConfig is job.kafka: a consumer group over topics. Every spout
// task is a member of the group, wherever it runs, so Kafka spreads the
// partitions over the tasks, and the group's committed offsets are where
// a restarted job resumes.
type KafkaConfig struct {
	Brokers []string `yaml:"brokers"`
	Topics  []string `yaml:"topics"`
	Group   string   `yaml:"group"`
	// StopAtEnd ends the source once every partition was read up to the
	// end it had when the job started: a batch job over what is there.
	// Without it the job runs until stopped.
	StopAtEnd bool       `yaml:"stop_at_end"`
	TLS       TLSConfig  `yaml:"tls"`
	SASL      SASLConfig `yaml:"sasl"`
	// SessionTimeout is how long the group waits for a member that stopped
	// answering (one that died) before it gives its partitions to the
	// others: until then their records wait. 0: the client's default, 45 s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
}

// JetStreamConfig is job.jetstream: a durable pull consumer of a stream,
// shared by every spout task, so the stream's messages are spread over
// them and acked progress is kept.
type JetStreamConfig struct {
	URL      string `yaml:"url"` // nats://host:port, or several, comma-separated
	Stream   string `yaml:"stream"`
	Consumer string `yaml:"consumer"`
	Subject  string `yaml:"subject"` // the consumer's filter subject, if any
	// AckWait is how long the server waits for an ack before it delivers a
	// message again (0: the source's default).
	AckWait time.Duration `yaml:"ack_wait"`
	// StopAtEnd ends the source once the messages that were in the stream
	// at the start are acked: a batch job over what is there.
	StopAtEnd bool      `yaml:"stop_at_end"`
	TLS       TLSConfig `yaml:"tls"`
	// User and Password (or PasswordEnv, an environment variable holding
	// it), or Creds (a .creds file), authenticate to the server.
	User        string `yaml:"user"`
	Password    string `yaml:"password"`
	PasswordEnv string `yaml:"password_env"`
	Creds       string `yaml:"creds"`
}

// TLSConfig is a client's TLS: on when Enabled or any file is named. CA
// is the PEM file of the authorities the server's certificate must chain
// to (empty: the system's); Cert and Key a client certificate, for
// servers that ask for one; ServerName the name to check in the server's
// certificate (empty: the host dialled).
type TLSConfig struct {
	Enabled    bool   `yaml:"enabled"`
	CA         string `yaml:"ca"`
	Cert       string `yaml:"cert"`
	Key        string `yaml:"key"`
	ServerName string `yaml:"server_name"`
}

// SASLConfig is Kafka's SASL: Mechanism plain, scram-sha-256 or
// scram-sha-512 (empty: none), User, and Password or PasswordEnv.
type SASLConfig struct {
	Mechanism   string `yaml:"mechanism"`
	User        string `yaml:"user"`
	Password    string `yaml:"password"`
	PasswordEnv string `yaml:"password_env"`
}

func (t TLSConfig) on() bool { return t.Enabled || t.CA != "" || t.Cert != "" || t.Key != "" }

// Config loads the files t names; key is where t is in the config
// (job.kafka.tls), for the errors.
func (t TLSConfig) Config(key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, setting(key+".ca", ": %v", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, setting(key+".ca", " %s: no PEM certificate in it", t.CA)
		}
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, setting(key+".cert", ": give cert and key together")
	}
	if t.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, setting(key+".cert", ": %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// secret is a password given in the file or by an environment variable.
func secret(key, inFile, env string) (string, error) {
	switch {
	case inFile != "" && env != "":
		return "", setting(key, ": password and password_env both set; give one")
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", setting(key+"_env", " %q: the variable is not set", env)
		}
		return v, nil
	}
	return inFile, nil
}

// validate checks the section when job.source is kafka.
func (k KafkaConfig) validate() error {
	switch {
	case len(k.Brokers) == 0:
		return setting("job.kafka.brokers", ": empty; list the seed brokers, host:port")
	case len(k.Topics) == 0:
		return setting("job.kafka.topics", ": empty; name the topics to consume")
	case k.Group == "":
		return setting("job.kafka.group", ": empty; name the consumer group (its committed offsets are where a restarted job resumes)")
	case k.SessionTimeout < 0 || (k.SessionTimeout > 0 && k.SessionTimeout < time.Second):
		return setting("job.kafka.session_timeout", " %v: want 0 (the client's default, 45s) or at least 1s", k.SessionTimeout)
	}
	switch strings.ToLower(k.SASL.Mechanism) {
	case "", "plain", "scram-sha-256", "scram-sha-512":
	default:
		return setting("job.kafka.sasl.mechanism", " %q: want plain, scram-sha-256 or scram-sha-512", k.SASL.Mechanism)
	}
	if k.SASL.Mechanism != "" && k.SASL.User == "" {
		return setting("job.kafka.sasl.user", ": empty, but sasl.mechanism is %s", k.SASL.Mechanism)
	}
	return nil
}

// validate checks the section when job.source is jetstream.
func (j JetStreamConfig) validate() error {
	switch {
	case j.URL == "":
		return setting("job.jetstream.url", ": empty; give the server's URL, nats://host:port")
	case j.Stream == "":
		return setting("job.jetstream.stream", ": empty; name the stream to read")
	case j.Consumer == "":
		return setting("job.jetstream.consumer", ": empty; name the durable consumer (it keeps the acked progress)")
	case j.Creds != "" && j.User != "":
		return setting("job.jetstream.creds", ": set with user; give one")
	case j.AckWait < 0:
		return setting("job.jetstream.ack_wait", " %v: want >= 0", j.AckWait)
	}
	return nil
}

// kafkaSource opens job.kafka.
func kafkaSource(k KafkaConfig, onError func(error)) (source.Factory, error) {
	var opts []kgo.Opt
	if k.TLS.on() {
		c, err := k.TLS.Config("job.kafka.tls")
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if m := strings.ToLower(k.SASL.Mechanism); m != "" {
		pass, err := secret("job.kafka.sasl.password", k.SASL.Password, k.SASL.PasswordEnv)
		if err != nil {
			return nil, err
		}
		switch m {
		case "plain":
			opts = append(opts, kgo.SASL(plain.Auth{User: k.SASL.User, Pass: pass}.AsMechanism()))
		case "scram-sha-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: k.SASL.User, Pass: pass}.AsSha256Mechanism()))
		case "scram-sha-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: k.SASL.User, Pass: pass}.AsSha512Mechanism()))
		}
	}
	if k.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(k.SessionTimeout))
	}
	cfg := kafka.Config{Brokers: k.Brokers, Topics: k.Topics, Group: k.Group, StopAtEnd: k.StopAtEnd, Opts: opts, OnError: onError}
	if err := cfg.Validate(); err != nil {
		return nil, setting("job.kafka", ": %v", err)
	}
	return kafka.New(cfg), nil
}

// jetStreamSource opens job.jetstream.
func jetStreamSource(j JetStreamConfig) (source.Factory, error) {
	var opts []nats.Option
	if j.TLS.on() {
		c, err := j.TLS.Config("job.jetstream.tls")
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(c))
	}
	switch {
	case j.Creds != "":
		if _, err := os.Stat(j.Creds); err != nil {
			return nil, setting("job.jetstream.creds", ": %v", err)
		}
		opts = append(opts, nats.UserCredentials(j.Creds))
	case j.User != "":
		pass, err := secret("job.jetstream.password", j.Password, j.PasswordEnv)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(j.User, pass))
	case j.Password != "" || j.PasswordEnv != "":
		return nil, setting("job.jetstream.user", ": empty, but a password is given")
	}
	return jetstream.New(jetstream.Config{URL: j.URL, Stream: j.Stream, Consumer: j.Consumer, Subject: j.Subject,
		AckWait: j.AckWait, StopAtEnd: j.StopAtEnd, Options: opts}), nil
}
