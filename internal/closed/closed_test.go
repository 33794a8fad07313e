package closed

import "testing"

type color string

var colors = []color{"red", "green"}

func TestParse(t *testing.T) {
	if c, err := Parse("color", "green", colors); err != nil || c != "green" {
		t.Errorf("Parse(green) = %q, %v", c, err)
	}
	_, err := Parse("color", "Green", colors)
	if err == nil || err.Error() != `unknown color "Green": want one of red, green` {
		t.Errorf("Parse(Green) error = %v", err)
	}
	c := color("red")
	if err := Unmarshal(&c, "color", []byte("blue"), colors); err == nil || c != "red" {
		t.Errorf("Unmarshal(blue) = %v, left %q; want an error and the value untouched", err, c)
	}
	if err := Unmarshal(&c, "color", []byte("green"), colors); err != nil || c != "green" {
		t.Errorf("Unmarshal(green) = %v, %q", err, c)
	}
}
