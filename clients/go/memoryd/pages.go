package memoryd

import (
	"context"
	"fmt"
	"iter"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// Memories walks every page of MemoryView for req, from req.PageToken (usually empty) to the
// end, one call per page (each with the client's deadline and retries). A failed page yields
// (nil, err) and ends the walk; stopping the loop early makes no further call. req is not
// modified; a nil req is an empty one.
//
//	for m, err := range c.Memories(ctx, &pb.MemoryViewRequest{Subject: "alice", PageSize: 100}) {
//		if err != nil { return err }
//		fmt.Println(m.GetKey(), m.GetText())
//	}
func (c *Client) Memories(ctx context.Context, req *pb.MemoryViewRequest, opts ...grpc.CallOption) iter.Seq2[*pb.Memory, error] {
	return pages(ctx, req, opts, c.MemoryView, (*pb.MemoryViewResponse).GetMemories,
		func(r *pb.MemoryViewRequest, token string) { r.PageToken = token })
}

// Views walks every page of ListViews for req (tenant admins), as Memories does.
func (c *Client) Views(ctx context.Context, req *pb.ListViewsRequest, opts ...grpc.CallOption) iter.Seq2[*pb.View, error] {
	return pages(ctx, req, opts, c.ListViews, (*pb.ListViewsResponse).GetViews,
		func(r *pb.ListViewsRequest, token string) { r.PageToken = token })
}

// pageRequest and pageResponse are the AIP-158 fields the generated messages share.
type pageRequest interface {
	proto.Message
	GetPageToken() string
}

type pageResponse interface{ GetNextPageToken() string }

func pages[Req pageRequest, Resp pageResponse, Item any](ctx context.Context, req Req, opts []grpc.CallOption,
	call func(context.Context, Req, ...grpc.CallOption) (Resp, error), items func(Resp) []Item,
	setToken func(Req, string)) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		var zero Item
		page := proto.Clone(req).(Req)
		if !page.ProtoReflect().IsValid() { // a nil request asks for everything, like an empty one
			page = page.ProtoReflect().New().Interface().(Req)
		}
		token := page.GetPageToken()
		for {
			resp, err := call(ctx, page, opts...)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, item := range items(resp) {
				if !yield(item, nil) {
					return
				}
			}
			next := resp.GetNextPageToken()
			if next == "" {
				return
			}
			if next == token { // a server bug, but never loop on it
				yield(zero, fmt.Errorf("memoryd: the server returned page token %q twice", next))
				return
			}
			token = next
			page = proto.Clone(page).(Req)
			setToken(page, next)
		}
	}
}
