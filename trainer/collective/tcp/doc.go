// Package tcp is the pure-Go transport of package collective, its default:
// rank 0 listens at MASTER_ADDR:MASTER_PORT, every rank authenticates with
// the job token, the ranks build a full TCP mesh (neighbours on one host
// move their data through shared-memory rings instead), and ring and
// recursive-doubling algorithms run the collectives over it.
//
// It implements backend.Backend and every optional operation; collective's
// Init is its one user, through New(Options) and ResolveToken (ccl uses
// JoinStar). It depends on package backend (the contract, Reduce), topology,
// detect (the Slurm step in the token) and envvars, never on collective.
//
// Where to read: tcp.go (the backend, the data plane: headers, sends that
// never block, failure), algos.go (the algorithms), shm.go with shm_linux.go
// (same-host links), token.go (where the job token comes from), api.go
// (Options and the star, which live in the rendezvous). Forming the mesh is
// package internal/rendezvous's: it takes Options and hands New one
// authenticated connection per rank (Connect), plus the framed messages
// (ReadMsg, WriteMsg) that shm.go's offer and answer travel in.
package tcp
