package memoryd

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

func unavailableTimes(n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = unavailable()
	}
	return errs
}

func TestCallsThatCouldApplyTwiceAreTriedOnce(t *testing.T) {
	calls := map[string]func(*Client) error{
		"ResolveConflict": func(c *Client) error {
			_, err := c.ResolveConflict(context.Background(), &pb.ResolveConflictRequest{Subject: "s"})
			return err
		},
		"ImportMemories": func(c *Client) error {
			_, err := c.ImportMemories(context.Background(), &pb.ImportMemoriesRequest{Subject: "s"})
			return err
		},
		"PutView with an expected version": func(c *Client) error {
			_, err := c.PutView(context.Background(), &pb.PutViewRequest{View: &pb.View{Agent: "a"}, ExpectedVersion: 3})
			return err
		},
	}
	for name, call := range calls {
		srv := &scripted{errs: unavailableTimes(2)}
		err := call(start(t, srv))
		var merr *Error
		if !errors.As(err, &merr) || merr.Code != codes.Unavailable || merr.Attempts != 1 || srv.calls() != 1 {
			t.Errorf("%s: want one attempt and its UNAVAILABLE, got %v after %d calls", name, err, srv.calls())
		}
	}
}

func TestSafeCallsAreRetriedUntilTheyPass(t *testing.T) {
	calls := map[string]func(*Client) error{
		"Write": func(c *Client) error {
			_, err := c.Write(context.Background(), &pb.WriteRequest{Subject: "s"})
			return err
		},
		"PutView without an expected version": func(c *Client) error {
			_, err := c.PutView(context.Background(), &pb.PutViewRequest{View: &pb.View{Agent: "a"}})
			return err
		},
		"GetView": func(c *Client) error {
			_, err := c.GetView(context.Background(), &pb.GetViewRequest{Agent: "a"})
			return err
		},
	}
	for name, call := range calls {
		srv := &scripted{errs: unavailableTimes(2)}
		if err := call(start(t, srv)); err != nil || srv.calls() != 3 {
			t.Errorf("%s: want success on the third attempt, got %v after %d calls", name, err, srv.calls())
		}
	}
}

func TestWriteSendsAUUIDIdempotencyKey(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 50 {
		key := NewIdempotencyKey()
		if !uuid.MatchString(key) || seen[key] {
			t.Fatalf("not a fresh version 4 UUID: %q", key)
		}
		seen[key] = true
	}
}

// recordSleeps replaces the client's sleep: the waits are recorded, not slept.
func recordSleeps(waits *[]time.Duration) Option {
	return func(o *options) {
		o.sleep = func(_ context.Context, d time.Duration) error { *waits = append(*waits, d); return nil }
	}
}

func unavailableRetryAfter(t *testing.T, d time.Duration) error {
	t.Helper()
	st, err := status.New(codes.Unavailable, "index restarting").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestTheServersRetryInfoDelayIsWaitedWhenLonger(t *testing.T) {
	var waits []time.Duration
	srv := &scripted{errs: []error{unavailableRetryAfter(t, 1500*time.Millisecond), unavailableRetryAfter(t, time.Microsecond)}}
	c := start(t, srv, recordSleeps(&waits))
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	// The first wait is the server's 1.5 s; the second the client's backoff (2 ms ceiling), longer than 1 µs.
	if len(waits) != 2 || waits[0] != 1500*time.Millisecond || waits[1] < time.Millisecond || waits[1] > 2*time.Millisecond {
		t.Fatalf("waits %v", waits)
	}
	var merr *Error
	_, err := start(t, &scripted{errs: []error{unavailableRetryAfter(t, time.Second)}}, WithRetryPolicy(NoRetries())).
		Recall(context.Background(), &pb.RecallRequest{})
	if !errors.As(err, &merr) || merr.RetryDelay != time.Second {
		t.Fatalf("want the RetryInfo delay on the error, got %#v", err)
	}
}

func TestTheTokenProviderIsAskedBeforeEveryAttempt(t *testing.T) {
	var mu sync.Mutex
	asked := 0
	provider := func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return fmt.Sprintf("token-%d", asked), nil
	}
	srv := &scripted{errs: unavailableTimes(2)}
	c := start(t, srv, WithTokenProvider(provider))
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetView(context.Background(), &pb.GetViewRequest{Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"Bearer token-1"}, {"Bearer token-2"}, {"Bearer token-3"}, {"Bearer token-4"}}
	if !slices.EqualFunc(srv.auth, want, slices.Equal) {
		t.Fatalf("authorization seen %q, want a refreshed token on each attempt %q", srv.auth, want)
	}
}

func TestAnEmptyTokenSendsNoAuthorizationAndAFailingProviderSendsNothing(t *testing.T) {
	srv := &scripted{}
	empty := start(t, srv, WithTokenProvider(func(context.Context) (string, error) { return "", nil }))
	if _, err := empty.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(srv.auth) != 1 || len(srv.auth[0]) != 0 {
		t.Fatalf("want no authorization metadata, got %q", srv.auth)
	}
	expired := errors.New("refresh token expired")
	failing := start(t, srv, WithTokenProvider(func(context.Context) (string, error) { return "", expired }))
	if _, err := failing.Recall(context.Background(), &pb.RecallRequest{}); !errors.Is(err, expired) || srv.calls() != 1 {
		t.Fatalf("want the provider's error and no call, got %v after %d calls", err, srv.calls())
	}
}

func spanContext(t *testing.T) context.Context {
	t.Helper()
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	state, err := trace.ParseTraceState("vendor=opaque")
	if err != nil {
		t.Fatal(err)
	}
	// What an OpenTelemetry SDK's tracer.Start puts in the context, as the API sees it.
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: state}))
}

func TestTraceContextReachesTheServerWithAnActiveSpan(t *testing.T) {
	srv := &scripted{errs: unavailableTimes(1)}
	c := start(t, srv)
	if _, err := c.Recall(spanContext(t), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=opaque"}
	if len(srv.traces) != 2 || !slices.Equal(srv.traces[0], want) || !slices.Equal(srv.traces[1], want) {
		t.Fatalf("want traceparent and tracestate on both attempts, got %q", srv.traces)
	}
}

func TestASpanStartedWithTheOpenTelemetrySDKIsTheServersParent(t *testing.T) {
	provider := sdktrace.NewTracerProvider() // records spans, exports nowhere
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	ctx, span := provider.Tracer("memoryd-client-test").Start(context.Background(), "remember home city")
	srv := &scripted{}
	if _, err := start(t, srv).Write(ctx, &pb.WriteRequest{Subject: "alice"}); err != nil {
		t.Fatal(err)
	}
	span.End()
	sc := span.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	if len(srv.traces) != 1 || !slices.Equal(srv.traces[0], []string{want}) {
		t.Fatalf("want traceparent %s, got %q", want, srv.traces)
	}
}

func TestNoTraceContextWithoutASpanOrWithoutAPropagator(t *testing.T) {
	srv := &scripted{}
	if _, err := start(t, srv).Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := start(t, srv, WithTracePropagator(nil)).Recall(spanContext(t), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	// The application's own propagators, e.g. otel.GetTextMapPropagator(), replace the default.
	if _, err := start(t, srv, WithTracePropagator(propagation.NewCompositeTextMapPropagator())).
		Recall(spanContext(t), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	for i, seen := range srv.traces {
		if len(seen) != 0 {
			t.Fatalf("call %d sent trace context %q", i, seen)
		}
	}
}

func TestMemoriesWalksEveryPage(t *testing.T) {
	srv := &scripted{items: 7, pageSize: 3, errs: []error{nil, unavailable()}} // page 2 is retried
	c := start(t, srv)
	req := &pb.MemoryViewRequest{Subject: "alice", PageSize: 3}
	var ids []string
	for m, err := range c.Memories(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.GetId())
	}
	if !slices.Equal(ids, []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}) {
		t.Fatalf("memories %v", ids)
	}
	if !slices.Equal(srv.tokens, []string{"", "3", "6"}) || req.GetPageToken() != "" {
		t.Fatalf("page tokens sent %q (request now %q)", srv.tokens, req.GetPageToken())
	}
}

func TestViewsWalksEveryPageAndStopsWhenTheLoopDoes(t *testing.T) {
	srv := &scripted{items: 5, pageSize: 2}
	c := start(t, srv)
	var agents []string
	for v, err := range c.Views(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, v.GetAgent())
	}
	if !slices.Equal(agents, []string{"agent-0", "agent-1", "agent-2", "agent-3", "agent-4"}) || srv.calls() != 3 {
		t.Fatalf("views %v after %d calls", agents, srv.calls())
	}
	for range c.Views(context.Background(), &pb.ListViewsRequest{}) {
		break
	}
	if srv.calls() != 4 {
		t.Fatalf("breaking out of the first page made %d calls in all, want 4", srv.calls())
	}
}

func TestAFailedPageEndsTheWalkWithItsError(t *testing.T) {
	srv := &scripted{items: 5, pageSize: 2, errs: []error{nil, status.Error(codes.PermissionDenied, "view changed")}}
	c := start(t, srv)
	var got []string
	var failure error
	for m, err := range c.Memories(context.Background(), &pb.MemoryViewRequest{Subject: "alice"}) {
		if err != nil {
			failure = err
			continue // the walk ends by itself after an error
		}
		got = append(got, m.GetId())
	}
	if !slices.Equal(got, []string{"m0", "m1"}) || status.Code(failure) != codes.PermissionDenied || srv.calls() != 2 {
		t.Fatalf("got %v then %v after %d calls", got, failure, srv.calls())
	}
}
