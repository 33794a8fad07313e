package trainer

import (
	"fmt"
	"math"
)

// Float32 is v, a hyperparameter given as a float64 (a flag), in the
// float32 the training computes in; an error when the conversion would
// change what v is: a value too small for a float32 that would become 0
// (--lr 1e-50 was refused as "learning rate 0", a value the user never
// gave) or one too large that would become infinite. NaN and infinities
// pass through for Validate to name.
func Float32(v float64) (float32, error) {
	f := float32(v)
	switch {
	case f == 0 && v != 0:
		return 0, fmt.Errorf("too small for the float32 the training computes in (smallest: %v)", float32(math.SmallestNonzeroFloat32))
	case math.IsInf(float64(f), 0) && !math.IsInf(v, 0):
		return 0, fmt.Errorf("too large for the float32 the training computes in (largest: %v)", float32(math.MaxFloat32))
	}
	return f, nil
}

// ResumeLine says what a run resumed from a checkpoint does: where it goes
// on, or, when the checkpoint has as many epochs as asked (--epochs 2
// after a 6-epoch run) or more, that there is nothing to train and the
// summary is the checkpoint's model, after its own count of epochs.
func ResumeLine(st Start, epochs int) string {
	line := fmt.Sprintf("resumed from %s at step %d", st.ResumedFile, st.ResumedFrom)
	if st.ResumedAtEpoch < epochs {
		return fmt.Sprintf("%s (epoch %d of %d)", line, st.ResumedAtEpoch+1, epochs)
	}
	done := fmt.Sprintf("all %d epochs done", epochs)
	if st.ResumedAtEpoch > epochs {
		done = fmt.Sprintf("%d epochs done, more than --epochs %d", st.ResumedAtEpoch, epochs)
	}
	return fmt.Sprintf("%s: %s; nothing to train: the summary is the checkpoint's model, after its %d epochs",
		line, done, st.ResumedAtEpoch)
}
