// Package tcp is the pure-Go transport of package collective, its default:
// rank 0 listens at MASTER_ADDR:MASTER_PORT, every rank authenticates with
// the job token, the ranks build a full TCP mesh (neighbours on one host
// move their data through shared-memory rings instead), and ring and
// recursive-doubling algorithms run the collectives over it.
//
// It implements backend.Backend and every optional operation; collective's
// Init is its one user, through New(Options) and ResolveToken. It depends
// on package backend (the contract, Reduce), topology, detect (the Slurm
// step in the token) and envvars, never on collective.
//
// Where to read: tcp.go (the backend, the data plane: headers, sends that
// never block, failure), algos.go (the algorithms), rendezvous.go with
// rendezvous_root.go and rendezvous_peer.go (forming the mesh; masteraddr.go
// is rank 0's check of MASTER_ADDR), auth.go
// (the handshake every connection starts with), shm.go (same-host links),
// token.go (where the job token comes from).
package tcp
