// Package memoryd is a thin typed client for the memoryd.v1 gRPC contract.
//
// It wraps the generated stubs (package memorydv1) with what every caller needs, following the
// policy all memoryd clients share (clients/conformance/policy.json):
//
//   - a bearer token from a fixed string or a provider asked before every attempt, so a token
//     is refreshed without rebuilding the client (an empty token sends no authorization);
//
//   - TLS or mTLS;
//
//   - a deadline per attempt (30 s) within the caller's context;
//
//   - retries on UNAVAILABLE only, with exponential backoff and jitter (or the server's
//     RetryInfo delay when longer), and only for calls whose replay is safe: a Write gets a
//     UUID idempotency key before its first attempt; ResolveConflict, ImportMemories and a
//     PutView with an expected version are never retried;
//
//   - W3C trace context (traceparent, tracestate) from the caller's OpenTelemetry span;
//
//   - page iterators over MemoryView (Memories) and ListViews (Views);
//
//   - a resuming Watcher over the Watch stream: it remembers the last cursor and opens the
//     stream again from it when the stream breaks, ends or stalls;
//
//   - typed errors (*Error) carrying the ErrorInfo reason, the BadRequest violations and the
//     request id.
//
//     c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(token))
//     if err != nil { ... }
//     defer c.Close()
//     resp, err := c.Recall(ctx, &memorydv1.RecallRequest{Subject: "user-1", Keys: []string{"primary_language"}})
//     var merr *memoryd.Error
//     if errors.As(err, &merr) && merr.Reason == "VIEW_DENIED" { ... }
package memoryd

import (
	"context"
	"crypto/tls"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// TokenProvider returns the bearer token for the next attempt of a call; it is asked before
// every attempt, so it can hand out a refreshed token (cache it: it is on every call's path).
// An empty token sends no authorization metadata; an error fails the call without sending it.
type TokenProvider func(context.Context) (string, error)

type options struct {
	token       TokenProvider
	tls         *tls.Config
	timeout     time.Duration
	retry       RetryPolicy
	propagator  propagation.TextMapPropagator
	dialOptions []grpc.DialOption
	sleep       func(context.Context, time.Duration) error
	heartbeat   time.Duration
	keepalive   keepalive.ClientParameters
}

// Option configures a Client.
type Option func(*options)

// WithToken sends "authorization: Bearer <token>" on every call. An empty token sends nothing.
func WithToken(token string) Option {
	return WithTokenProvider(func(context.Context) (string, error) { return token, nil })
}

// WithTokenProvider asks p for the bearer token before every attempt of every call.
func WithTokenProvider(p TokenProvider) Option {
	return func(o *options) { o.token = p }
}

// WithTokenFunc is WithTokenProvider.
//
// Deprecated: use WithTokenProvider.
func WithTokenFunc(f func(context.Context) (string, error)) Option { return WithTokenProvider(f) }

// WithTLS dials with TLS; put client certificates in cfg.Certificates for mTLS. Without it
// the connection is plaintext (loopback and tests only).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithTimeout sets the deadline of each attempt (default DefaultTimeout, 30 s; 0 means none).
// The caller's context bounds the whole call, retries and backoff included.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithRetryPolicy replaces DefaultRetryPolicy(). Which methods are retried at all is not
// configurable: a call that could apply twice is never retried.
func WithRetryPolicy(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// WithHeartbeatInterval is the server's Watch heartbeat interval (default
// DefaultHeartbeatInterval, 15 s, the server's default): a Watcher that receives nothing for
// WatchStallFactor intervals opens its stream again.
func WithHeartbeatInterval(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// WithKeepalive replaces DefaultKeepalive() (Dial only); keepalive.ClientParameters{} sends no
// pings. A Time under the server's accepted interval (5 s by default) gets the connection
// closed with GOAWAY "too_many_pings".
func WithKeepalive(p keepalive.ClientParameters) Option { return func(o *options) { o.keepalive = p } }

// WithDialOptions adds grpc dial options (Dial only).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// Client calls MemoryService and ViewAdminService. It is safe for concurrent use.
type Client struct {
	conn *grpc.ClientConn // nil when built with New over a caller-owned connection
	// redial makes a new connection like conn (Dial only): a Watcher whose stream went silent
	// reopens on one of its own, since the silent connection may be half-open.
	redial func() (*grpc.ClientConn, error)
	memory pb.MemoryServiceClient
	admin  pb.ViewAdminServiceClient
	opts   options
}

func buildOptions(opts []Option) options {
	o := options{timeout: DefaultTimeout, retry: DefaultRetryPolicy(), propagator: propagation.TraceContext{},
		sleep: sleepCtx, heartbeat: DefaultHeartbeatInterval, keepalive: DefaultKeepalive()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Dial connects to a memoryd at target ("host:port"). The connection is made lazily.
func Dial(target string, opts ...Option) (*Client, error) {
	o := buildOptions(opts)
	transport := insecure.NewCredentials()
	if o.tls != nil {
		transport = credentials.NewTLS(o.tls)
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(transport)}
	if o.keepalive.Time > 0 {
		// Not with a zero Time: grpc-go would raise it to its 10 s floor rather than turn pings off.
		dial = append(dial, grpc.WithKeepaliveParams(o.keepalive))
	}
	dial = append(dial, o.dialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, err
	}
	c := New(conn, opts...)
	c.conn = conn
	c.redial = func() (*grpc.ClientConn, error) { return grpc.NewClient(target, dial...) }
	return c, nil
}

// New wraps a connection the caller owns (Close then does not close it).
func New(conn grpc.ClientConnInterface, opts ...Option) *Client {
	return &Client{memory: pb.NewMemoryServiceClient(conn), admin: pb.NewViewAdminServiceClient(conn),
		opts: buildOptions(opts)}
}

// Close closes the connection Dial made.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Write stores memories. Without an IdempotencyKey a fresh UUID is sent (on a copy of req)
// on every attempt, so a retried Write is applied once.
func (c *Client) Write(ctx context.Context, req *pb.WriteRequest, opts ...grpc.CallOption) (*pb.WriteResponse, error) {
	if req == nil {
		return nil, errNilRequest
	}
	if req.GetIdempotencyKey() == "" {
		req = proto.Clone(req).(*pb.WriteRequest)
		req.IdempotencyKey = NewIdempotencyKey()
	}
	return invoke(ctx, c, pb.MemoryService_Write_FullMethodName, req, c.memory.Write, opts)
}

// Recall returns the memories that matter for a query, a conversation (Context: its recent
// turns, most recent last; a query is then optional) or a set of keys.
func (c *Client) Recall(ctx context.Context, req *pb.RecallRequest, opts ...grpc.CallOption) (*pb.RecallResponse, error) {
	return invoke(ctx, c, pb.MemoryService_Recall_FullMethodName, req, c.memory.Recall, opts)
}

// Erase forgets or purges memories and returns the receipt.
func (c *Client) Erase(ctx context.Context, req *pb.EraseRequest, opts ...grpc.CallOption) (*pb.EraseResponse, error) {
	return invoke(ctx, c, pb.MemoryService_Erase_FullMethodName, req, c.memory.Erase, opts)
}

// MemoryView lists one page of a subject's memories as the caller's view shows them
// (Memories walks all pages).
func (c *Client) MemoryView(ctx context.Context, req *pb.MemoryViewRequest, opts ...grpc.CallOption) (*pb.MemoryViewResponse, error) {
	return invoke(ctx, c, pb.MemoryService_MemoryView_FullMethodName, req, c.memory.MemoryView, opts)
}

// GetHistory lists every version of one memory, newest first.
func (c *Client) GetHistory(ctx context.Context, req *pb.GetHistoryRequest, opts ...grpc.CallOption) (*pb.GetHistoryResponse, error) {
	return invoke(ctx, c, pb.MemoryService_GetHistory_FullMethodName, req, c.memory.GetHistory, opts)
}

// GetExtractionJob reports on an extraction job started by a Write with turns.
func (c *Client) GetExtractionJob(ctx context.Context, req *pb.GetExtractionJobRequest, opts ...grpc.CallOption) (*pb.GetExtractionJobResponse, error) {
	return invoke(ctx, c, pb.MemoryService_GetExtractionJob_FullMethodName, req, c.memory.GetExtractionJob, opts)
}

// ResolveConflict settles a pending conflict. It is never retried: the contract gives it no
// idempotency key, so a replay could apply twice.
func (c *Client) ResolveConflict(ctx context.Context, req *pb.ResolveConflictRequest, opts ...grpc.CallOption) (*pb.ResolveConflictResponse, error) {
	return invoke(ctx, c, pb.MemoryService_ResolveConflict_FullMethodName, req, c.memory.ResolveConflict, opts)
}

// ExportMemories returns a subject's memories as a portable archive.
func (c *Client) ExportMemories(ctx context.Context, req *pb.ExportMemoriesRequest, opts ...grpc.CallOption) (*pb.ExportMemoriesResponse, error) {
	return invoke(ctx, c, pb.MemoryService_ExportMemories_FullMethodName, req, c.memory.ExportMemories, opts)
}

// ImportMemories loads an archive made by ExportMemories. It is never retried (no idempotency
// key in the contract).
func (c *Client) ImportMemories(ctx context.Context, req *pb.ImportMemoriesRequest, opts ...grpc.CallOption) (*pb.ImportMemoriesResponse, error) {
	return invoke(ctx, c, pb.MemoryService_ImportMemories_FullMethodName, req, c.memory.ImportMemories, opts)
}

// EndSession ends a session of a subject and returns its snapshot as the caller's view shows
// it. Retried on UNAVAILABLE: ending again rebuilds the same snapshot.
func (c *Client) EndSession(ctx context.Context, req *pb.EndSessionRequest, opts ...grpc.CallOption) (*pb.EndSessionResponse, error) {
	return invoke(ctx, c, pb.MemoryService_EndSession_FullMethodName, req, c.memory.EndSession, opts)
}

// ResumeSession returns the latest session snapshot of a subject (or the one of
// req.SessionId) that the caller's view reads, written by any agent on any device.
func (c *Client) ResumeSession(ctx context.Context, req *pb.ResumeSessionRequest, opts ...grpc.CallOption) (*pb.ResumeSessionResponse, error) {
	return invoke(ctx, c, pb.MemoryService_ResumeSession_FullMethodName, req, c.memory.ResumeSession, opts)
}

// PutView stores an agent's view (tenant admins). It is retried only without an
// ExpectedVersion: with one, a replay would fail on the version the first attempt bumped.
func (c *Client) PutView(ctx context.Context, req *pb.PutViewRequest, opts ...grpc.CallOption) (*pb.PutViewResponse, error) {
	return invoke(ctx, c, pb.ViewAdminService_PutView_FullMethodName, req, c.admin.PutView, opts)
}

// GetView reads an agent's view (tenant admins).
func (c *Client) GetView(ctx context.Context, req *pb.GetViewRequest, opts ...grpc.CallOption) (*pb.GetViewResponse, error) {
	return invoke(ctx, c, pb.ViewAdminService_GetView_FullMethodName, req, c.admin.GetView, opts)
}

// ListViews lists one page of the tenant's views (tenant admins; Views walks all pages).
func (c *Client) ListViews(ctx context.Context, req *pb.ListViewsRequest, opts ...grpc.CallOption) (*pb.ListViewsResponse, error) {
	return invoke(ctx, c, pb.ViewAdminService_ListViews_FullMethodName, req, c.admin.ListViews, opts)
}

// DeleteView deletes an agent's view (tenant admins).
func (c *Client) DeleteView(ctx context.Context, req *pb.DeleteViewRequest, opts ...grpc.CallOption) (*pb.DeleteViewResponse, error) {
	return invoke(ctx, c, pb.ViewAdminService_DeleteView_FullMethodName, req, c.admin.DeleteView, opts)
}
