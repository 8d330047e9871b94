// Command acktor is the one binary: the word count of the paper's
// experiment 4, cluster nodes, their status and acker count, and
// benchmarks.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// exitError carries a one-line reason and an exit status.
type exitError struct {
	code int
	msg  string
	// option, when the error is about one option, is its name in options,
	// and rest what follows the option's name in msg.
	option, rest string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	root, finish := newRoot()
	err := root.Execute()
	finish()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "acktor:", ee.msg)
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "acktor:", err)
	os.Exit(2)
}

// newRoot builds the command tree; call finish after Execute, whatever it
// returned (it stops a CPU profile).
func newRoot() (root *cobra.Command, finish func()) {
	var level, cpuprofile, memprofile string
	stopProfile, writeMem := func() {}, func() {}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	root = &cobra.Command{
		Use:           "acktor",
		Short:         "Reliable tuple tracking and a stream speed layer on Proto.Actor",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			l, err := logrus.ParseLevel(level)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log.SetLevel(l)
			if cpuprofile != "" {
				fh, err := os.Create(cpuprofile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				if err := pprof.StartCPUProfile(fh); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				stopProfile = func() { pprof.StopCPUProfile(); _ = fh.Close() }
			}
			if memprofile != "" {
				fh, err := os.Create(memprofile)
				if err != nil {
					return fmt.Errorf("--memprofile: %w", err)
				}
				writeMem = func() {
					runtime.GC() // the profile counts what was allocated up to the last collection
					if err := pprof.Lookup("allocs").WriteTo(fh, 0); err != nil {
						log.WithError(err).Error("--memprofile")
					}
					_ = fh.Close()
				}
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&level, "log-level", "warning", "log level: debug, info, warning, error")
	root.PersistentFlags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the command to this file")
	root.PersistentFlags().StringVar(&memprofile, "memprofile", "", "write a profile of what the command allocated (and still holds) to this file when it ends")
	root.AddCommand(newWordcount(log))
	root.AddCommand(newBench(log))
	root.AddCommand(newNode(log))
	root.AddCommand(newStatus())
	root.AddCommand(newAckers())
	return root, func() { stopProfile(); writeMem() }
}
