package health

import (
	"math"
	"time"
)

// stepMedian is the median of a run's step times in bounded memory: a
// histogram of 2 %-wide buckets from 100 ns to ~1000 s, whatever the number
// of steps. The median, not the mean, is what names a slow rank: a rank
// descheduled for a few steps by other work on its node (the noise of a
// shared machine) keeps its median, a rank that is slower at every step
// (a busy core, a slower CPU) does not.
type stepMedian struct {
	n       int
	buckets [bucketCount]uint32
}

const (
	bucketMin   = 100 * time.Nanosecond
	bucketRatio = 1.02
	bucketCount = 1200
)

func (m *stepMedian) add(d time.Duration) {
	i := 0
	if d > bucketMin {
		i = min(bucketCount-1, int(math.Log(float64(d)/float64(bucketMin))/math.Log(bucketRatio)))
	}
	m.buckets[i]++
	m.n++
}

// seconds is the median step time, the geometric middle of its bucket; 0
// without steps.
func (m *stepMedian) seconds() float64 {
	if m.n == 0 {
		return 0
	}
	var seen int
	for i, c := range m.buckets {
		if seen += int(c); 2*seen >= m.n {
			return bucketMin.Seconds() * math.Pow(bucketRatio, float64(i)+0.5)
		}
	}
	return 0
}
