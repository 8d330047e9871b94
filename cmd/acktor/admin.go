package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/gateway"
)

// gatewayFlags are how the admin commands reach a node's gateway.
type gatewayFlags struct {
	url      string
	tokenEnv string
	ca       string
	timeout  time.Duration
}

func (g *gatewayFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&g.url, "gateway", "http://127.0.0.1:7070", "a member's gateway (gateway.address in its config; a batch job's driver, or any member of a service): a URL, or host:port for http://host:port")
	cmd.Flags().DurationVar(&g.timeout, "request-timeout", 10*time.Second, "how long to wait for the gateway")
	cmd.Flags().StringVar(&g.ca, "ca", "", "PEM file of the authority that signed an HTTPS gateway's certificate (default: the system's)")
}

// client is the HTTP client for the gateway: trusting --ca, if given.
func (g *gatewayFlags) client() (*http.Client, error) {
	if g.ca == "" {
		return http.DefaultClient, nil
	}
	pem, err := os.ReadFile(g.ca)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", g.ca)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}, nil
}

// call sends a request to the gateway and decodes its JSON answer into out;
// an error answer becomes an error with the gateway's message.
func (g *gatewayFlags) call(ctx context.Context, method, path, token string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(gatewayURL(g.url), "/")+path, rd)
	if err != nil {
		return fmt.Errorf("--gateway %q: %w", g.url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client, err := g.client()
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("gateway: %s (%s)", e.Error, res.Status)
		}
		return fmt.Errorf("gateway: %s", res.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("gateway: answer: %w", err)
	}
	return nil
}

// gatewayURL is the --gateway flag as a URL: host:port, as a node's config
// gives its gateway's address, is http://host:port.
func gatewayURL(flag string) string {
	if strings.Contains(flag, "://") {
		return flag
	}
	return "http://" + flag
}

func newStatus() *cobra.Command {
	var g gatewayFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a running cluster: members, ackers, in flight, completed/failed/replayed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st gateway.Status
			if err := g.call(cmd.Context(), "GET", "/api/status", "", nil, &st); err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	g.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the gateway's JSON")
	return cmd
}

func printStatus(w io.Writer, st gateway.Status) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "MEMBER\tADDRESS\tKINDS\n")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.ID, m.Address, strings.Join(m.Kinds, ","))
	}
	fmt.Fprintf(tw, "\nACKER (set version %d: %d ackers)\tMEMBER\tIN FLIGHT\tTRACKED\tCOMPLETED\tFAILED\tEXPIRED\tHANDED OVER\tADOPTED\tREFUSED\n",
		st.AckerSet.Version, st.AckerSet.Ackers)
	for _, a := range st.Ackers {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", a.ID, a.Member, a.InFlight, a.Tracked, a.Completed, a.Failed, a.Expired, a.HandedOver, a.Adopted,
			a.BadMessages+a.Rejected+a.Dropped+a.ClientsRefused)
	}
	if st.AckerErrs != "" {
		fmt.Fprintf(tw, "(some ackers did not answer: %s)\n", st.AckerErrs)
	}
	if len(st.CounterTasks) > 0 {
		fmt.Fprintf(tw, "\nCOUNTER TASK\tMEMBER\tSTANDBY\n")
		for _, k := range st.CounterTasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Task, k.Member, k.Standby)
		}
	}
	if len(st.Stages) > 0 {
		fmt.Fprintf(tw, "\nSTAGE (this member)\tTASKS\tλ/s\tμ/s\tρ\tIN STAGE: M/M/c\tc×M/M/1\tmeasured\tTIME: M/M/c\tc×M/M/1\tmeasured\n")
		for _, s := range st.Stages {
			model, wait := inStage(s.Model)
			split, splitWait := inStage(s.Split)
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.2f\t%s\t%s\t%.2f\t%s\t%s\t%s\n", s.Name, s.Servers, s.Arrivals, s.Service,
				s.Model.Rho, model, split, s.L, wait, splitWait, s.W.Round(time.Microsecond))
		}
		for _, s := range st.Stages {
			if s.Warning != "" {
				fmt.Fprintf(tw, "WARNING: %s\n", s.Warning)
			}
		}
	}
	if r := st.Run; r != nil {
		total := "?"
		if r.Total != nil {
			total = strconv.FormatInt(*r.Total, 10)
		}
		fmt.Fprintf(tw, "\nRUN\troots %d/%s\tcompleted %d\tfailed %d (timed out %d)\treplayed %d\tdead-lettered %d\tin flight %d\tlatency p50 %.3g ms p99 %.3g ms\t%.1f s\n",
			r.Roots, total, r.Completed, r.Failed, r.TimedOut, r.Replayed, r.DeadLettered, r.InFlight, 1000*r.LatencyP50, 1000*r.LatencyP99, r.ElapsedSeconds)
	}
	return tw.Flush()
}

// inStage formats a model's L and W.
func inStage(m actors.MMc) (l, w string) {
	switch {
	case m == (actors.MMc{}): // nothing timed yet: too few messages
		return "–", "–"
	case !m.Stable:
		return "unstable", "∞"
	}
	return fmt.Sprintf("%.2f", m.L), m.W.Round(time.Microsecond).String()
}

func newAckers() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ackers",
		Short: "Change the acker count of a running cluster",
	}
	var g gatewayFlags
	set := &cobra.Command{
		Use:   "set N",
		Short: "Set the number of ackers; records move to their new ackers, no root replays",
		Long: `Asks a member's gateway (a batch job's driver, any member of a service)
to change the acker count while the job runs. Only the roots on the ring arcs that change owner move; each acker hands their
records to the new owner, so no root is replayed because of the change. The
admin token is read from the environment variable --token-env names (the
gateway's gateway.token or gateway.token_env).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return &exitError{code: 2, msg: fmt.Sprintf("ackers set %q: want a count >= 1", args[0])}
			}
			token := os.Getenv(g.tokenEnv)
			if token == "" {
				return &exitError{code: 2, msg: fmt.Sprintf("--token-env: $%s is empty or unset", g.tokenEnv)}
			}
			var set gateway.AckerSet
			if err := g.call(cmd.Context(), "POST", "/api/admin/ackers", token, gateway.SetAckersRequest{Ackers: n}, &set); err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ackers: %d (acker set version %d)\n", set.Ackers, set.Version)
			return nil
		},
	}
	g.add(set)
	set.Flags().StringVar(&g.tokenEnv, "token-env", "ACKTOR_TOKEN", "environment variable holding the admin token")
	cmd.AddCommand(set)
	return cmd
}
