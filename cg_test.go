package cg
import "testing"
func BenchmarkCgo(b *testing.B){ for i := range b.N { Nop(i) } }
