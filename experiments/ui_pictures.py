"""Take the README's pictures from the live page (GET /ui) in headless Chromium: a
path-aware tree over the 8x8 spine-leaf, and a GRID plan with spine aggregators, each
selected so that exactly its links are highlighted.

    python -m experiments.ui_pictures --out docs/figures    # ui_tree.png, ui_plan.png

Needs root (Mininet) and Debian's chromium and chromium-driver (make setup installs them).
"""

import sys
from pathlib import Path

from experiments.cli import build_fabric, experiment_parser, fabric_arguments, progress_printer
from experiments.testbed import FabricTestbed
from mininet_topos.platform_net import PlatformError
from mininet_topos.registry import fabric_hosts

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
say = progress_printer("ui_pictures")


def chromium(width=1500, height=950):
    """A headless Chromium under Selenium, with Debian's browser and driver (so Selenium
    Manager never downloads one)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=%d,%d" % (width, height)):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def entry_selector(kind, item_id):
    """The CSS selector of the page's list entry of a tree, plan, round or job."""
    return '#%ss li[data-kind="%s"][data-id="%d"]' % (kind, kind, item_id)


def entry_text(driver, kind, item_id):
    """What the page's entry of a tree, plan, round or job says."""
    from selenium.webdriver.common.by import By
    return driver.find_element(By.CSS_SELECTOR, entry_selector(kind, item_id)).text


def select(driver, kind, item_id, timeout_s=15):
    """Click the page's entry of a tree, plan, round or job once it is listed; the keys
    ("a|b", names sorted) of the links the page then highlights."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    entry = entry_selector(kind, item_id)
    WebDriverWait(driver, timeout_s).until(lambda d: d.find_elements(By.CSS_SELECTOR, entry))
    driver.find_element(By.CSS_SELECTOR, entry).click()
    WebDriverWait(driver, timeout_s).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, entry + ".selected"))
    return highlighted(driver)


def highlighted(driver):
    from selenium.webdriver.common.by import By
    return {line.get_attribute("data-link")
            for line in driver.find_elements(By.CSS_SELECTOR, "line.link.highlighted")}


def link_keys(edges):
    """The page's keys of the links a list of (a, b) edges uses."""
    return {"|".join(sorted(edge)) for edge in edges}


def parse_args(argv):
    parser = experiment_parser("experiments.ui_pictures", __doc__)
    fabric_arguments(parser, bw=20.0)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"),
                        help="folder for ui_tree.png and ui_plan.png")
    return parser.parse_args(argv)


def take(args):
    topo = build_fabric(args, aggregators="top", aggregator_bw=args.bw / 2)
    hosts = fabric_hosts(topo)
    args.out.mkdir(parents=True, exist_ok=True)
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port, progress=say) as bed:
        tree = bed.client.request("POST", "/multicast/trees", {
            "source": hosts[0], "receivers": hosts[1::3][:7],
            "bandwidth_mbps": args.bw / 4})
        plan = bed.client.request("POST", "/ina/plans", {
            "job": "picture", "workers": hosts[2:10], "ps": hosts[-1], "gradient_mb": 1})
        driver = chromium()
        try:
            driver.get(bed.client.base_url + "/ui")
            pictures = []
            for kind, item in (("tree", tree), ("plan", plan)):
                select(driver, kind, item["id"])
                path = args.out / ("ui_%s.png" % kind)
                driver.save_screenshot(str(path))
                pictures.append(path)
        finally:
            driver.quit()
    return pictures


def main(argv=None):
    args = parse_args(argv)
    try:
        for path in take(args):
            print(path)
    except PlatformError as error:
        sys.exit("error: %s" % error)


if __name__ == "__main__":
    main()
