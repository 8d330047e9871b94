package main

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/acktor/acktor/source/kafka"
)

// TestKafkaOnError: a failed offset commit is logged as an error and
// counted; the other errors the source recovers from are warnings.
func TestKafkaOnError(t *testing.T) {
	log, hook := test.NewNullLogger()
	var failures atomic.Int64
	onError := kafkaOnError(log, &failures)

	commit := fmt.Errorf("source: kafka: periodic commit of group %q failed for orders/0 at offset 7: %w", "g", kafka.ErrCommit)
	onError(commit)
	if failures.Load() != 1 {
		t.Errorf("%d commit failures counted, want 1", failures.Load())
	}
	e := hook.LastEntry()
	if e == nil || e.Level != logrus.ErrorLevel || e.Data[logrus.ErrorKey] != commit {
		t.Fatalf("logged %+v, want the commit error at error level", e)
	}

	onError(errors.New("source: kafka: group session lost"))
	if failures.Load() != 1 {
		t.Errorf("%d commit failures counted after another error, want 1", failures.Load())
	}
	if e := hook.LastEntry(); e == nil || e.Level != logrus.WarnLevel {
		t.Fatalf("logged %+v, want a warning", e)
	}
}
