// Package memoryd is a thin typed client for the memoryd.v1 gRPC contract.
//
// It wraps the generated stubs (package memorydv1) with what every caller needs: a bearer
// token sent on each call, TLS or mTLS, a default deadline, retries with exponential backoff
// and jitter on UNAVAILABLE only (a Write without an idempotency key gets a generated one, so
// its retries are safe), and typed errors (*Error) carrying the ErrorInfo reason, the
// BadRequest violations and the request id.
//
//	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(token))
//	if err != nil { ... }
//	defer c.Close()
//	resp, err := c.Recall(ctx, &memorydv1.RecallRequest{Subject: "user-1", Keys: []string{"primary_language"}})
//	var merr *memoryd.Error
//	if errors.As(err, &merr) && merr.Reason == "VIEW_DENIED" { ... }
package memoryd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	mrand "math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// Defaults of a Client; each has an Option to change it.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultMaxAttempts = 4
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
)

type options struct {
	token       func(context.Context) (string, error)
	tls         *tls.Config
	timeout     time.Duration
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	dialOptions []grpc.DialOption
	sleep       func(context.Context, time.Duration) error
}

// Option configures a Client.
type Option func(*options)

// WithToken sends "authorization: Bearer <token>" on every call. An empty token sends nothing.
func WithToken(token string) Option {
	return WithTokenFunc(func(context.Context) (string, error) { return token, nil })
}

// WithTokenFunc asks f for the bearer token before every call (e.g. to refresh it).
func WithTokenFunc(f func(context.Context) (string, error)) Option {
	return func(o *options) { o.token = f }
}

// WithTLS dials with TLS; put client certificates in cfg.Certificates for mTLS. Without it
// the connection is plaintext (loopback and tests only).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithTimeout sets the deadline of each attempt of a call whose context has none (default
// 30s; 0 means no default deadline).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithRetry sets how often a call failing with UNAVAILABLE is tried in all (1 = no retry) and
// the backoff: base * 2^(attempt-1), capped at max, with jitter.
func WithRetry(maxAttempts int, base, max time.Duration) Option {
	return func(o *options) {
		if maxAttempts < 1 {
			maxAttempts = 1
		}
		o.maxAttempts, o.backoffBase, o.backoffMax = maxAttempts, base, max
	}
}

// WithDialOptions adds grpc dial options (Dial only).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// Client calls MemoryService and ViewAdminService. It is safe for concurrent use.
type Client struct {
	conn   *grpc.ClientConn // nil when built with New over a caller-owned connection
	memory pb.MemoryServiceClient
	admin  pb.ViewAdminServiceClient
	opts   options
}

func buildOptions(opts []Option) options {
	o := options{timeout: DefaultTimeout, maxAttempts: DefaultMaxAttempts, backoffBase: DefaultBackoffBase,
		backoffMax: DefaultBackoffMax, sleep: sleepCtx}
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
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(transport)}, o.dialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, err
	}
	c := New(conn, opts...)
	c.conn = conn
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

// bearer is the per-RPC credential: one "authorization" entry per call.
type bearer struct {
	token  func(context.Context) (string, error)
	secure bool
}

func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := b.token(ctx)
	if err != nil || tok == "" {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// NewIdempotencyKey returns a random key for WriteRequest.IdempotencyKey.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// backoff is the pause before attempt n+1 (n >= 1): exponential, capped, with jitter in [d/2, d].
func (o *options) backoff(n int) time.Duration {
	d := o.backoffBase
	for i := 1; i < n && d < o.backoffMax; i++ {
		d *= 2
	}
	if d > o.backoffMax {
		d = o.backoffMax
	}
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(d-half)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// invoke runs one RPC with the client's credentials, deadline and retry policy.
func invoke[Req, Resp any](ctx context.Context, c *Client, req Req,
	rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), callOpts []grpc.CallOption) (Resp, error) {
	o := &c.opts
	opts := callOpts
	if o.token != nil {
		opts = append([]grpc.CallOption{grpc.PerRPCCredentials(bearer{token: o.token, secure: o.tls != nil})}, opts...)
	}
	var resp Resp
	var err error
	for attempt := 1; ; attempt++ {
		var trailer metadata.MD
		actx, cancel := ctx, context.CancelFunc(func() {})
		if _, has := ctx.Deadline(); !has && o.timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, o.timeout)
		}
		resp, err = rpc(actx, req, append(opts, grpc.Trailer(&trailer))...)
		cancel()
		if err == nil {
			return resp, nil
		}
		if status.Code(err) != codes.Unavailable || attempt >= o.maxAttempts || ctx.Err() != nil {
			return resp, toError(err, trailer, attempt)
		}
		if serr := o.sleep(ctx, o.backoff(attempt)); serr != nil {
			return resp, toError(err, trailer, attempt)
		}
	}
}

var errNilRequest = errors.New("memoryd: nil request")

// Write stores memories. Without an IdempotencyKey a generated one is sent (on a copy of req),
// so a retried Write is applied once.
func (c *Client) Write(ctx context.Context, req *pb.WriteRequest, opts ...grpc.CallOption) (*pb.WriteResponse, error) {
	if req == nil {
		return nil, errNilRequest
	}
	if req.GetIdempotencyKey() == "" {
		req = proto.Clone(req).(*pb.WriteRequest)
		req.IdempotencyKey = NewIdempotencyKey()
	}
	return invoke(ctx, c, req, c.memory.Write, opts)
}

// Recall returns the memories that matter for a query or a set of keys.
func (c *Client) Recall(ctx context.Context, req *pb.RecallRequest, opts ...grpc.CallOption) (*pb.RecallResponse, error) {
	return invoke(ctx, c, req, c.memory.Recall, opts)
}

// Erase forgets or purges memories and returns the receipt.
func (c *Client) Erase(ctx context.Context, req *pb.EraseRequest, opts ...grpc.CallOption) (*pb.EraseResponse, error) {
	return invoke(ctx, c, req, c.memory.Erase, opts)
}

// MemoryView lists a subject's memories as the caller's view shows them.
func (c *Client) MemoryView(ctx context.Context, req *pb.MemoryViewRequest, opts ...grpc.CallOption) (*pb.MemoryViewResponse, error) {
	return invoke(ctx, c, req, c.memory.MemoryView, opts)
}

// GetHistory lists every version of one memory, newest first.
func (c *Client) GetHistory(ctx context.Context, req *pb.GetHistoryRequest, opts ...grpc.CallOption) (*pb.GetHistoryResponse, error) {
	return invoke(ctx, c, req, c.memory.GetHistory, opts)
}

// GetExtractionJob reports on an extraction job started by a Write with turns.
func (c *Client) GetExtractionJob(ctx context.Context, req *pb.GetExtractionJobRequest, opts ...grpc.CallOption) (*pb.GetExtractionJobResponse, error) {
	return invoke(ctx, c, req, c.memory.GetExtractionJob, opts)
}

// ResolveConflict settles a pending conflict.
func (c *Client) ResolveConflict(ctx context.Context, req *pb.ResolveConflictRequest, opts ...grpc.CallOption) (*pb.ResolveConflictResponse, error) {
	return invoke(ctx, c, req, c.memory.ResolveConflict, opts)
}

// ExportMemories returns a subject's memories as a portable archive.
func (c *Client) ExportMemories(ctx context.Context, req *pb.ExportMemoriesRequest, opts ...grpc.CallOption) (*pb.ExportMemoriesResponse, error) {
	return invoke(ctx, c, req, c.memory.ExportMemories, opts)
}

// ImportMemories loads an archive made by ExportMemories.
func (c *Client) ImportMemories(ctx context.Context, req *pb.ImportMemoriesRequest, opts ...grpc.CallOption) (*pb.ImportMemoriesResponse, error) {
	return invoke(ctx, c, req, c.memory.ImportMemories, opts)
}

// PutView stores an agent's view (tenant admins).
func (c *Client) PutView(ctx context.Context, req *pb.PutViewRequest, opts ...grpc.CallOption) (*pb.PutViewResponse, error) {
	return invoke(ctx, c, req, c.admin.PutView, opts)
}

// GetView reads an agent's view (tenant admins).
func (c *Client) GetView(ctx context.Context, req *pb.GetViewRequest, opts ...grpc.CallOption) (*pb.GetViewResponse, error) {
	return invoke(ctx, c, req, c.admin.GetView, opts)
}

// ListViews lists the tenant's views (tenant admins).
func (c *Client) ListViews(ctx context.Context, req *pb.ListViewsRequest, opts ...grpc.CallOption) (*pb.ListViewsResponse, error) {
	return invoke(ctx, c, req, c.admin.ListViews, opts)
}

// DeleteView deletes an agent's view (tenant admins).
func (c *Client) DeleteView(ctx context.Context, req *pb.DeleteViewRequest, opts ...grpc.CallOption) (*pb.DeleteViewResponse, error) {
	return invoke(ctx, c, req, c.admin.DeleteView, opts)
}
