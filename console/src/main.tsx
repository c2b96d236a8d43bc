/** Entry point: mounts the console and routes link clicks through the History API. */
import { render } from "preact";
import { App } from "./app.tsx";
import { interceptLinkClicks } from "./router.ts";
import "uplot/dist/uPlot.min.css";
import "./styles.css";

const root = document.getElementById("app");
if (!root) throw new Error("the page has no #app element");
document.addEventListener("click", interceptLinkClicks);
render(<App />, root);
