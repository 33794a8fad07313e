package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestOn(t *testing.T) {
	for _, host := range []string{"", "127.0.0.1"} {
		port, err := On(host)
		if err != nil || port <= 0 || port > 65535 {
			t.Fatalf("On(%q) = %d, %v", host, port, err)
		}
		// Free means bindable now.
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("On(%q) = %d, which cannot be bound: %v", host, port, err)
		}
		l.Close()
	}
	if _, err := On("256.0.0.1"); err == nil {
		t.Error("On(256.0.0.1) succeeded, want an error")
	}
}
