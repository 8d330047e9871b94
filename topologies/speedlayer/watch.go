package speedlayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/acktor/acktor/gateway"
)

// Watch subscribes to the top zones by fares over WebSocket at the gateway
// base (http://host:port) and prints each update to out until ctx ends,
// the gateway shuts down (nil: the stream ended), or the gateway drops the
// stream (its reason is the error).
func Watch(ctx context.Context, base string, top int, every time.Duration, out io.Writer) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("watch: gateway %q: want http://host:port", base)
	}
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = "/api/stream/counters/" + ZonesComponent
	u.RawQuery = url.Values{"top": {fmt.Sprint(top)}, "by": {"sum"}, "every": {every.String()}}.Encode()
	c, _, err := websocket.Dial(ctx, u.String(), nil)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer c.CloseNow()
	for {
		var a gateway.CounterAnswer
		if err := wsjson.Read(ctx, c, &a); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusGoingAway {
				fmt.Fprintf(out, "the stream ended: %s\n", ce.Reason) // the speed layer stopped
				return nil
			}
			if errors.As(err, &ce) {
				return fmt.Errorf("watch: the gateway closed the stream: %s", ce.Reason)
			}
			return fmt.Errorf("watch: %w", err)
		}
		if a.Error != "" { // the query failed this time; the stream goes on
			fmt.Fprintf(out, "(no answer: %s)\n", a.Error)
			continue
		}
		if err := Print(out, &a); err != nil {
			return err
		}
	}
}

// Print writes one update as a table: zone, orders, fares, distinct and
// repeat riders.
func Print(out io.Writer, a *gateway.CounterAnswer) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	span := "all time"
	if a.Start != nil && a.End.Sub(*a.Start) < 100*365*24*time.Hour {
		span = fmt.Sprintf("%v to %s", a.End.Sub(*a.Start), a.End.Format("15:04:05"))
	}
	fmt.Fprintf(out, "window %s, %d orders applied\n", span, a.Applied)
	fmt.Fprintf(tw, "zone\torders\tfares\tdistinct riders\trepeat riders\t\n")
	for _, e := range a.Top {
		fmt.Fprintf(tw, "%s\t%d\t%d.%02d\t%d\t%d\t\n", e.Key, e.Count, e.Sum/100, e.Sum%100, a.Distinct[e.Key], a.Repeats[e.Key])
	}
	fmt.Fprintln(tw, strings.Repeat("-", 60))
	return tw.Flush()
}
