package config

import (
	"fmt"
	"unicode/utf8"
)

// MaxTopicNameLength is Kafka's limit on topic names.
const MaxTopicNameLength = 249

// TopicNameProblem is what is wrong with a topic name.
type TopicNameProblem int8

const (
	TopicNameEmpty   TopicNameProblem = iota + 1 // ""
	TopicNameDots                                // "." or ".."
	TopicNameTooLong                             // more than MaxTopicNameLength characters
	TopicNameBadChar                             // a character other than [a-zA-Z0-9._-]
)

// TopicNameError is a topic name Kafka would refuse, and why. Callers that
// speak to people (the console's form) word it themselves from Problem.
type TopicNameError struct {
	Name    string
	Problem TopicNameProblem
	Char    rune // the first character not allowed (TopicNameBadChar)
}

func (e *TopicNameError) Error() string {
	switch e.Problem {
	case TopicNameEmpty:
		return "the empty string"
	case TopicNameDots:
		return fmt.Sprintf("%q is not allowed", e.Name)
	case TopicNameTooLong:
		return fmt.Sprintf("%q is longer than %d characters", e.Name, MaxTopicNameLength)
	}
	return fmt.Sprintf("%q contains a character other than ASCII alphanumerics, '.', '_' and '-'", e.Name)
}

// ValidateTopicName checks a topic name as Kafka does: 1 to 249 characters
// of [a-zA-Z0-9._-], and not "." or "..". The error is a *TopicNameError.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return &TopicNameError{Name: name, Problem: TopicNameEmpty}
	case name == "." || name == "..":
		return &TopicNameError{Name: name, Problem: TopicNameDots}
	case len(name) > MaxTopicNameLength:
		return &TopicNameError{Name: name, Problem: TopicNameTooLong}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(name[i:])
		return &TopicNameError{Name: name, Problem: TopicNameBadChar, Char: r}
	}
	return nil
}
