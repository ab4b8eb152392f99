package launch

import (
	"fmt"
	"net"
)

// FreePort asks the kernel for a TCP port that is free on this machine now
// (for --master_port 0). Another process may take it before rank 0 listens;
// the window is short and rank 0's bind error names the port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
