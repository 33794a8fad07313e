package shquote_test

import (
	"errors"
	"fmt"

	"github.com/batchkit/batchkit/internal/shquote"
)

func Example() {
	line, _ := shquote.Join([]string{"python", "/path/train.py", "--nodes=2", "it's", "", "a\nb", "=ls"})
	fmt.Println(line)

	_, err := shquote.Quote("a\x00b")
	fmt.Println(errors.Is(err, shquote.ErrNUL))
	// Output:
	// python /path/train.py --nodes=2 'it'\''s' '' 'a
	// b' '=ls'
	// true
}
