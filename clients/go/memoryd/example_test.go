package memoryd_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
	"github.com/memoryd/memoryd/clients/go/memoryd"
)

// A token read again before every attempt: rotating the file rotates the client's token.
func ExampleWithTokenProvider() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithTokenProvider(func(context.Context) (string, error) {
		token, err := os.ReadFile(".memoryd/tokens/demo-agent.token")
		return strings.TrimSpace(string(token)), err
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// Every memory of a subject, page after page.
func ExampleClient_Memories() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for m, err := range c.Memories(context.Background(), &pb.MemoryViewRequest{Subject: "alice", PageSize: 100}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.GetKey(), m.GetText())
	}
}

// Recall from the conversation itself: its recent turns, most recent last, and no query.
func ExampleClient_Recall() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	now := timestamppb.Now()
	conversation := []*pb.Turn{
		{TurnId: "t1", Speaker: "user", Text: "I fly back next week.", Time: now},
		{TurnId: "t2", Speaker: "assistant", Text: "Where to?", Time: now},
		{TurnId: "t3", Speaker: "user", Text: "To my home city, of course!", Time: now},
	}
	found, err := c.Recall(context.Background(), &pb.RecallRequest{Subject: "alice", Context: conversation})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range found.GetMemories() {
		fmt.Println(m.GetMemory().GetText(), m.GetRelevance())
	}
}
