package auction

import (
	"fmt"
	"strings"
)

// countryContinents places every ISO 3166-1 alpha-2 code (isoCountries)
// on the continents of Continents, so that a region such as na/DE is
// refused where a user types it. Countries across a border of continents
// are on both (RU, TR, EG, ...): a provider there may say either.
// Offer.Validate does not use this table: a node must not drop a peer's
// offer because their tables differ by a newly assigned code.
var countryContinents = map[string]string{
	"af": "AO BF BI BJ BW CD CF CG CI CM CV DJ DZ EG EH ER ET GA GH GM GN GQ GW KE KM LR LS LY MA MG ML MR MU MW MZ " +
		"NA NE NG RE RW SC SD SH SL SN SO SS ST SZ TD TG TN TZ UG YT ZA ZM ZW",
	"an": "AQ BV GS HM TF",
	"as": "AE AF AM AZ BD BH BN BT CC CN CX CY EG GE HK ID IL IN IO IQ IR JO JP KG KH KP KR KW KZ LA LB LK " +
		"MM MN MO MV MY NP OM PH PK PS QA RU SA SG SY TH TJ TL TM TR TW UZ VN YE",
	"eu": "AD AL AM AT AX AZ BA BE BG BY CH CY CZ DE DK EE ES FI FO FR GB GE GG GI GR HR HU IE IM IS IT JE KZ " +
		"LI LT LU LV MC MD ME MK MT NL NO PL PT RO RS RU SE SI SJ SK SM TR UA VA",
	"na": "AG AI AW BB BL BM BQ BS BZ CA CR CU CW DM DO GD GL GP GT HN HT JM KN KY LC MF MQ MS MX NI PA PM PR " +
		"SV SX TC TT US VC VG VI",
	"oc": "AS AU CK FJ FM GU KI MH MP NC NF NR NU NZ PF PG PN PW SB TK TO TV UM VU WF WS",
	"sa": "AR BO BR CL CO EC FK GF GY PE PY SR TT UY VE",
}

// countryAliases are codes people write that ISO assigns to no country,
// or to another one than meant.
var countryAliases = map[string]string{"UK": "GB", "EL": "GR"}

// continentsOf lists the continents a country code is on, in Continents order.
func continentsOf(country string) []string {
	var out []string
	for _, c := range Continents {
		if strings.Contains(" "+countryContinents[c]+" ", " "+country+" ") {
			out = append(out, c)
		}
	}
	return out
}

// checkContinent is the error for a continent code that is not one,
// with the likely one meant.
func checkContinent(s string) error {
	if isContinent(strings.ToLower(s)) {
		return nil
	}
	return fmt.Errorf("%q is not a continent code (%s)%s", s, strings.Join(Continents, ", "), DidYouMean(s, Continents))
}

// checkCountry refuses a code ISO 3166-1 does not assign. Two-letter
// codes are all one edit apart, so the only suggestions are known
// aliases (UK is GB).
func checkCountry(s string) error {
	u := strings.ToUpper(s)
	if len(u) == 2 && isCountry(u) && strings.Contains(isoCountries, " "+u+" ") {
		return nil
	}
	if a, ok := countryAliases[u]; ok {
		return fmt.Errorf("%q is not an ISO 3166-1 alpha-2 country code; did you mean %q?", s, a)
	}
	return fmt.Errorf("%q is not an ISO 3166-1 alpha-2 country code (such as DE, US, JP)", s)
}

// ParseRegion parses a provider's region as typed, continent/country
// (eu/DE, na/US), case-insensitive, and refuses a country that is not on
// the continent named: a region is how renters find and place work, and
// na/DE would put a German provider in North America's shard.
func ParseRegion(s string) (Region, error) {
	cont, country, ok := strings.Cut(strings.TrimSpace(s), "/")
	r := Region{Continent: strings.ToLower(cont), Country: strings.ToUpper(country)}
	if !ok {
		return r, fmt.Errorf("%q: want continent/country, e.g. eu/DE or na/US", s)
	}
	if err := checkContinent(cont); err != nil {
		return r, fmt.Errorf("region %q: %v", s, err)
	}
	if err := checkCountry(country); err != nil {
		return r, fmt.Errorf("region %q: %v", s, err)
	}
	on := continentsOf(r.Country)
	if !contains(on, r.Continent) {
		return r, fmt.Errorf("region %q: %s is not in %s; did you mean %q?", s, r.Country, r.Continent, on[0]+"/"+r.Country)
	}
	return r, nil
}
