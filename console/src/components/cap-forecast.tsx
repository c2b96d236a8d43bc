/**
 * Where this period's spend is heading, in one sentence, from `GetBalance`'s forecast fields: the burn rate
 * and the date the cap is reached at that rate. The core does the arithmetic; the page only words it.
 */
import { formatUsd } from "../money.ts";

/** The `GetBalance` fields the forecast reads. */
export interface ForecastFigures {
  spendCapUsdMicros?: bigint | undefined;
  spentUsdMicros: bigint;
  burnRateUsdMicrosPerDay: bigint;
  capReachedDate?: string | undefined;
}

/** Which of the forecast's sentences applies, for the page and its tests (`data-forecast`). */
function kindOf(f: ForecastFigures): "no-cap" | "no-spend" | "reached" | "date" | "not-this-period" {
  if (f.spendCapUsdMicros === undefined) return "no-cap";
  if (f.spendCapUsdMicros > 0n && f.spentUsdMicros >= f.spendCapUsdMicros) return "reached";
  if (f.spentUsdMicros === 0n) return "no-spend";
  return f.capReachedDate === undefined ? "not-this-period" : "date";
}

/** The forecast sentence, with the rate it rests on. */
export function CapForecast({ figures }: { figures: ForecastFigures }) {
  const kind = kindOf(figures);
  const rate = `${formatUsd(figures.burnRateUsdMicrosPerDay)} a day`;
  const words = {
    "no-cap": "There is no cap to forecast against.",
    "no-spend": "Nothing is spent yet this month, so there is no rate to forecast from.",
    reached: "The cap is reached: calls are refused until the next period begins or the cap is raised.",
    date: (
      <>
        At this month's rate ({rate}) the cap is reached on <strong>{figures.capReachedDate}</strong> (UTC).
      </>
    ),
    "not-this-period": <>At this month's rate ({rate}) the cap is not reached within this period.</>,
  }[kind];
  return (
    <p class="forecast" data-forecast={kind}>
      {words}
    </p>
  );
}
