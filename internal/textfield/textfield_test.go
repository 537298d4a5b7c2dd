package textfield

import (
	"strings"
	"testing"
)

func TestValidateNamesTheField(t *testing.T) {
	err := Validate("owner", "", 256)
	if err == nil || err.Error() != "owner: must not be empty" {
		t.Fatalf("Validate(owner, \"\") = %v, want \"owner: must not be empty\"", err)
	}
	if err := Validate("owner", strings.Repeat("o", 3), 3); err != nil {
		t.Fatalf("Validate at exactly the limit = %v, want nil", err)
	}
	if err := Validate("owner", strings.Repeat("o", 4), 3); err == nil {
		t.Fatal("Validate one byte past the limit = nil, want an error")
	}
}
