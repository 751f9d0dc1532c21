package cron

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// fieldNames name the 5 cron fields, in order, for error messages.
var fieldNames = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"}

// dayNames are the day-of-week names that robfig's parser takes, with
// their numbers (Sunday is 0).
var dayNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// sunday7 is Sunday's second number in the day-of-week field, as in Vixie
// cron and crontab(5): 7, like 0.
const sunday7 = 7

// checkFields checks the 5 cron fields of text for what robfig's parser
// lets through or refuses unlike cron, and returns them as robfig must get
// them: an empty list item ("1,,2") is refused, naming the field, and
// day-of-week 7 (alone, ending a range, with or without a step) is
// written as 0.
func checkFields(text string) (string, error) {
	fields := strings.Fields(text)
	for i, field := range fields {
		if err := checkList(fieldNames[i], field); err != nil {
			return "", err
		}
	}
	dow := strings.Split(fields[4], ",")
	for i, item := range dow {
		days, err := sundaySeven(item)
		if err != nil {
			return "", fmt.Errorf("the day-of-week field %q: %v", fields[4], err)
		}
		if days != "" {
			dow[i] = days
		}
	}
	fields[4] = strings.Join(dow, ",")
	return strings.Join(fields, " "), nil
}

// checkList refuses a field (named name) whose list has an empty item,
// which robfig's parser skips: a comma at its start or end, or two in a
// row, is a typo more likely than a list meant without that item.
func checkList(name, field string) error {
	items := strings.Split(field, ",")
	if !slices.Contains(items, "") {
		return nil
	}
	rest := slices.DeleteFunc(items, func(s string) bool { return s == "" })
	if len(rest) == 0 {
		return fmt.Errorf("the %s field %q has no value, only commas; give a value, a list such as 1,15, or *", name, field)
	}
	return fmt.Errorf("the %s field %q has an empty list item (a comma at its start or end, or two in a row); remove the extra comma, as in %q, or put the missing value there",
		name, field, strings.Join(rest, ","))
}

// sundaySeven returns the days of the day-of-week item, a list for robfig
// with 0 for Sunday, when the item names 7 (7, 5-7, fri-7, 1-7/2, 7/2);
// else "" (robfig parses the item, and refuses it if it is wrong).
func sundaySeven(item string) (string, error) {
	rng, stepText, hasStep := strings.Cut(item, "/")
	lowText, highText, isRange := strings.Cut(rng, "-")
	low, lowOK := dayNumber(lowText)
	high, highOK := low, lowOK
	if isRange {
		high, highOK = dayNumber(highText)
	} else if hasStep && low == sunday7 {
		high = sunday7 // robfig reads N/step as N-6/step: 7/step is Sunday alone
	}
	if !lowOK || !highOK || (low != sunday7 && high != sunday7) || low > high {
		return "", nil
	}
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 {
			return "", fmt.Errorf("the step of %q must be a whole number of at least 1", item)
		}
		step = min(n, sunday7+1) // past 7 only low counts; d += step must not overflow
	}
	var days []string
	for d := low; d <= high; d += step {
		days = append(days, strconv.Itoa(d%sunday7))
	}
	return strings.Join(days, ","), nil
}

// dayNumber reads a day of the week: a number from 0 to 7 or a name.
func dayNumber(s string) (int, bool) {
	if d, ok := dayNames[strings.ToLower(s)]; ok {
		return d, true
	}
	d, err := strconv.Atoi(s)
	return d, err == nil && d >= 0 && d <= sunday7
}
