// Package tcp is the pure-Go transport of package collective, its default:
// rank 0 listens at MASTER_ADDR:MASTER_PORT, every rank authenticates with
// the job token, each rank links to the O(log n) ranks its algorithms talk
// to (neighbours on one host move their data through shared-memory rings
// instead), and ring, recursive-doubling and tree algorithms run the
// collectives over those links.
//
// It implements backend.Backend and every optional operation; collective's
// Init is its one user, through New(Options) and ResolveToken (ccl uses
// JoinStar). It depends on package backend (the contract, Reduce), topology,
// detect (the Slurm step in the token) and envvars, never on collective.
//
// Where to read: tcp.go (the backend, the data plane: headers, sends that
// never block, failure), algos.go (the algorithms), peers.go (which ranks
// each algorithm talks to, hence a rank's links), shm.go with shm_linux.go
// (same-host links), token.go (where the job token comes from), api.go
// (Options and the star, which live in the rendezvous). Forming the links is
// package internal/rendezvous's: it takes Options and a rank's links and
// hands New one authenticated connection per link (ConnectLinks), plus the
// framed messages (ReadMsg, WriteMsg) that shm.go's offer and answer
// travel in.
package tcp
