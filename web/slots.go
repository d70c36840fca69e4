package web

import (
	"strconv"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// userSlots bounds what one user runs at once against the cluster: record
// reads and searches (the messages page, its JSON and its export; a search
// may scan up to 100 million records for two minutes), and live tails. A
// user who opens more is told to wait for one to finish, so one viewer
// cannot take the console's and the brokers' capacity from everyone else.
// The console-wide bound on tails is kafkaview's MaxTails.
type userSlots struct {
	mu   sync.Mutex
	used map[string]int // "scan:<user id>", "tail:<user id>". Lock mu.
}

// Per-user bounds.
const (
	MaxScansPerUser = 2
	MaxTailsPerUser = 4
)

func newUserSlots() *userSlots { return &userSlots{used: map[string]int{}} }

func (u *userSlots) acquire(key string, limit int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.used[key] >= limit {
		return false
	}
	u.used[key]++
	return true
}

func (u *userSlots) release(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.used[key] <= 1 {
		delete(u.used, key)
		return
	}
	u.used[key]--
}

var (
	errTooManyScans = &Error{Status: fiber.StatusTooManyRequests, Title: "Too many searches at once",
		Text: "You have " + strconv.Itoa(MaxScansPerUser) + " reads or searches of records running.",
		Hint: "Wait for one to finish (or stop it by closing its page), then try again."}
	errTooManyTails = &Error{Status: fiber.StatusTooManyRequests, Title: "Too many live tails",
		Text: "You have " + strconv.Itoa(MaxTailsPerUser) + " live tails open.",
		Hint: "Close one of them, then try again."}
)

// startScan takes one of the user's scan slots; call the returned function
// when the scan ends. It fails with 429 when the user has none left.
func startScan(c *fiber.Ctx) (func(), error) {
	return take(c, "scan:", MaxScansPerUser, errTooManyScans)
}

func startTail(c *fiber.Ctx) (func(), error) {
	return take(c, "tail:", MaxTailsPerUser, errTooManyTails)
}

func take(c *fiber.Ctx, kind string, limit int, refused *Error) (func(), error) {
	s, u := serverOf(c), CurrentUser(c)
	if s == nil || u == nil {
		return func() {}, nil
	}
	key := kind + strconv.FormatInt(u.ID, 10)
	if !s.scans.acquire(key, limit) {
		return nil, refused
	}
	var once sync.Once
	return func() { once.Do(func() { s.scans.release(key) }) }, nil
}
