"""A fixed, ordinary English paragraph (written for these tests) for perplexity checks."""

PARAGRAPH = (
    "Water is one of the most common substances on Earth, and it is essential for all known forms of life. "
    "It covers about seventy percent of the surface of the planet, mostly in the oceans. A molecule of "
    "water is made of two hydrogen atoms and one oxygen atom. At normal pressure, water freezes at zero "
    "degrees Celsius and boils at one hundred degrees Celsius. When water is heated, it turns into steam, "
    "and when it is cooled, it becomes ice. Ice is less dense than liquid water, which is why it floats. "
    "The water cycle describes how water moves between the oceans, the air and the land. The sun heats "
    "the water in the oceans, lakes and rivers, and some of it evaporates into the air. The water vapour "
    "rises, cools and forms clouds. When the clouds become heavy, the water falls back to the ground as "
    "rain or snow. Some of this water flows into rivers and returns to the sea, while some of it soaks "
    "into the ground and becomes groundwater. People use water for drinking, cooking, washing, farming "
    "and industry, so clean water is one of the most important resources in the world."
)
