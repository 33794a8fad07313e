// Package rendezvous forms the TCP backend's world: rank 0 listens at
// MASTER_ADDR:MASTER_PORT, every rank authenticates with the job token, and
// the ranks open the links package tcp asks for (ConnectLinks: one
// connection per linked rank, on every rank or on none), after checking
// that their file-descriptor limit allows it. JoinStar is the same rendezvous for a
// backend whose data moves elsewhere (ccl), its connections kept as the
// job's watchdog.
//
// Package tcp is its one user (it re-exports Options and the star), and
// the interface between them is narrow: Options (with WithDefaults),
// ConnectLinks, and the framed messages (ReadMsg, WriteMsg) that tcp's
// shared-memory setup sends over the mesh. It knows nothing of the data
// plane.
//
// Where to read: rendezvous.go (the protocol, and what both sides use: the
// acceptor, dialPeer, the address table), root.go (rank 0's steps), peer.go
// (every other rank's), auth.go (the handshake every connection starts
// with, and the framed messages), masteraddr.go (rank 0's check of
// MASTER_ADDR), fdlimit.go (the file-descriptor check), star.go
// (JoinStar), options.go.
package rendezvous
